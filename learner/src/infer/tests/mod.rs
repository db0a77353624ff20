//! Model-checked tests (loom) of the inference hand-offs: the dynamic
//! batcher's queue and sleep protocol, and the state table's claims, leases
//! and recycling. Built only with `--cfg loom`, which the wrapper
//! `scripts/loom-rustc.sh` adds to `seed_learner` alone (a global
//! `RUSTFLAGS="--cfg loom"` breaks tokio's dependents). From the workspace
//! root:
//!
//! ```sh
//! LOOM_CRATE=seed_learner RUSTC_WRAPPER=$PWD/scripts/loom-rustc.sh \
//!   cargo test -p seed-learner --release --lib infer::tests
//! ```
//!
//! The build shares the release target dir: only loom and this crate are
//! compiled again (under their own hashes, so the normal build stays
//! fresh), not the dependency tree.
//!
//! Cost, measured on 2 cores: the build after a release build of the
//! workspace about 4 min (this crate, in test mode with loom), the ten
//! tests about 16-35 s.
//!
//! The bigger models (three threads, several operations each) run with a
//! preemption bound (see `builder`); `LOOM_MAX_PREEMPTIONS` overrides it, e.g.
//! `LOOM_MAX_PREEMPTIONS=5` for a deeper search (minutes). The registration
//! test (`a_consumer_registering_while_two_producers_push_is_woken`) needs a
//! bound of at least 4 to reach the interleaving it guards.
mod loom_batcher;
mod loom_state_table;

/// A loom model builder with `preemption_bound`, unless the environment
/// (`LOOM_MAX_PREEMPTIONS`) already set one. `None`: explore every
/// interleaving.
fn builder(preemption_bound: Option<usize>) -> loom::model::Builder {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = preemption_bound;
    }
    builder
}
