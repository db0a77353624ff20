#!/bin/sh
# RUSTC_WRAPPER for the replay loom tests: adds `--cfg loom` only to the
# seed_learner crate and to cargo's target-info probe (crate `___`), so cargo
# links loom for seed_learner while every dependency (tokio, hyper, candle)
# builds normally. A global RUSTFLAGS="--cfg loom" breaks tokio's dependents.
rustc="$1"; shift
case " $* " in
  *" --crate-name seed_learner "*|*" --crate-name ___ "*) exec "$rustc" "$@" --cfg loom ;;
  *) exec "$rustc" "$@" ;;
esac
