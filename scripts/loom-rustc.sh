#!/bin/sh
# RUSTC_WRAPPER for the loom model checks: adds `--cfg loom` only to the
# crate named by LOOM_CRATE (seed_learner or seed_replay) and to cargo's
# target-info probe (crate `___`, so cargo resolves the `cfg(loom)`
# dependency `loom`); every other crate (tokio, hyper, candle) builds
# normally. Why not RUSTFLAGS="--cfg loom": it reaches every crate, which
# breaks tokio's dependents (tokio hides `tokio::net` under cfg(loom) and
# hyper-util then fails to build) and rebuilds every dependency. With this
# wrapper the loom build shares the release target dir: only loom, the
# crate under test and the crates that depend on it there are compiled
# again, and under their own hashes, so the normal build stays fresh.
rustc="$1"; shift
crate="${LOOM_CRATE:-seed_learner}"
case " $* " in
  *" --crate-name $crate "*|*" --crate-name ___ "*) exec "$rustc" "$@" --cfg loom ;;
  *) exec "$rustc" "$@" ;;
esac
