//! Model-checked tests (loom) of the inference hand-offs: the dynamic
//! batcher's queue and sleep protocol, and the state table's claims, leases
//! and recycling. Built only with `--cfg loom`, which the wrapper
//! `loom-rustc.sh` here adds to `seed_learner` alone (a global
//! `RUSTFLAGS="--cfg loom"` breaks tokio's dependents). From the workspace
//! root:
//!
//! ```sh
//! RUSTC_WRAPPER=$PWD/learner/src/infer/tests/loom-rustc.sh CARGO_TARGET_DIR=target/loom \
//!   cargo test -p seed-learner --release --lib infer::tests
//! ```
//!
//! The separate target directory keeps these artifacts from invalidating the
//! normal build; its first build compiles the dependency tree once.
//!
//! Cost, measured on 2 cores: the first build of the target directory about
//! 5.3 min (269 crates, 407 s of CPU; 23 min when other builds shared the
//! cores), a rebuild after touching this crate about 35 s, the ten tests
//! about 16-20 s (`--lib loom`, with the replay's six, about 17 s).
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
