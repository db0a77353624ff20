//! The learner's floor plan, enforced: every file under `src/` may import
//! only its own layer or a lower one (the table in `lib.rs`'s docs), and no
//! files import each other in a loop.
//!
//! Why: the learner's files once formed a 13-file import cycle held together
//! by upward imports (metrics importing the trainer, the error type
//! importing the trainer's error, the CLI importing the server's constants),
//! so no stage could be read, tested or replaced alone. A new file lands in
//! its folder's layer; a new top-level module must be added below, or this
//! test fails. The checker is the dev-only crate `seed-layering-check`
//! (`shared/layering-check/`), which every crate's layering test shares.
use std::path::Path;

use seed_layering_check as layering_check;

use layering_check::Layers;

/// The layers, bottom first. A folder's entry covers every file in it.
const LAYERS: Layers = &[
    (
        "leaves: import nothing of the crate",
        &["metrics", "error", "device", "heap", "loom", "log_throttle"],
    ),
    (
        "the CPU's f32 ops: import nothing of the crate but each other",
        &["model/cpu"],
    ),
    ("the networks and the weights inference reads", &["model"]),
    (
        "inference: batcher, state table, step requests, the sink interface",
        &["infer"],
    ),
    (
        "the unroll store, the seam to replay (in-process buffer or remote table), and its sampler",
        &["unroll_store"],
    ),
    (
        "learning's stages: unrolls (the inference sink), prefetch, the optimizer, checkpoints",
        &[
            "learn/unroll",
            "learn/prefetch",
            "learn/optimizer",
            "learn/checkpoint",
        ],
    ),
    (
        "the interface every algorithm's training step implements",
        &["learn/agent_step"],
    ),
    (
        "the algorithms, one folder each: neither imports the trainer",
        &["learn/vtrace", "learn/r2d2"],
    ),
    ("the choice of algorithm (`--algo`)", &["learn/agent"]),
    (
        "the trainer (algorithm-neutral), its figures and thread, the learning side's settings",
        &["learn"],
    ),
    ("serving: the tonic service and its transports", &["serve"]),
    (
        "reports: Prometheus, metrics log, summary, curve, progress",
        &["report"],
    ),
    (
        "the application: config, composition root, run loop, local actors, eval",
        &["app"],
    ),
    ("re-exports", &["lib"]),
];

#[test]
fn every_file_imports_only_its_own_or_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // `src/infer/tests/`: the loom tests, built only under `cfg(loom)`.
    let failures = layering_check::check(&src, LAYERS, &["infer/tests"]);
    assert!(
        failures.is_empty(),
        "layering broken:\n{}",
        failures.join("\n")
    );
}
