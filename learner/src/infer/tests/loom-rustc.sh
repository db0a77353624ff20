#!/bin/sh
# RUSTC_WRAPPER for the learner's loom tests (src/infer/tests): adds
# `--cfg loom` only to the seed_learner crate and to cargo's target-info probe
# (crate `___`, so cargo resolves the `cfg(loom)` dependency `loom` for it);
# every dependency (tokio, hyper, candle) builds normally. A global
# RUSTFLAGS="--cfg loom" breaks tokio's dependents (tokio hides `tokio::net`
# under cfg(loom) and hyper-util then fails to build).
rustc="$1"; shift
case " $* " in
  *" --crate-name seed_learner "*|*" --crate-name ___ "*) exec "$rustc" "$@" --cfg loom ;;
  *) exec "$rustc" "$@" ;;
esac
