//! The crate's layering, enforced: every file under `src/` may import only
//! files of its own layer or a lower one (the list in `lib.rs`'s docs), and
//! no files import each other in a loop.
//!
//! Why: the replay buffer's parts used to import each other in cycles
//! (`error` and `layout`; `buffer`, `checkpoint`, `slot`, `storage`, the
//! samplers), which made every part depend on all of them. Stating the
//! layers is cheap; this keeps the statement true. A new file must be given
//! a layer in [`LAYERS`], or this test fails. The checker itself is the
//! dev-only crate `seed-layering-check` (`shared/layering-check/`), which
//! every crate's layering test shares.
use std::collections::BTreeSet;
use std::path::Path;

use seed_layering_check as layering_check;

use layering_check::Layers;

/// The layers, bottom first: module paths as in the source tree
/// (`sampler/fifo` is `src/sampler/fifo.rs`, `sampler` is
/// `src/sampler/mod.rs`, `lib` is `src/lib.rs`).
const LAYERS: Layers = &[
    (
        "leaves: import nothing of the crate",
        &[
            "loom",
            "dtype",
            "item_key",
            "group_id",
            "counters",
            "policy_lag",
            "writer_policy",
            "rng",
        ],
    ),
    ("errors", &["error"]),
    (
        "descriptions and services over errors",
        &["layout", "atomic_file", "notifier", "rate_limiter"],
    ),
    ("items and storage", &["item", "heap", "storage"]),
    ("the slot protocol", &["slot", "recovery"]),
    ("the sample batch", &["batch"]),
    ("the samplers' view of the buffer", &["shared"]),
    (
        "samplers and their index structures",
        &[
            "sampler/state",
            "sampler/power",
            "sampler/min_tree",
            "sampler/sum_tree",
            "sampler/uniform",
            "sampler/recent",
            "sampler/without_replacement",
            "sampler/fifo",
            "sampler/max_times",
            "sampler/prioritized",
            "sampler/grouped",
        ],
    ),
    ("the sampler dispatcher", &["sampler"]),
    ("the buffer", &["buffer"]),
    ("on the buffer", &["checkpoint", "lazy", "follow"]),
    ("re-exports", &["lib"]),
];

#[test]
fn every_file_imports_only_its_own_or_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // `src/tests/`: the loom tests, built only under `cfg(loom)`.
    let failures = layering_check::check(&src, LAYERS, &["tests"]);
    assert!(
        failures.is_empty(),
        "layering broken:\n{}",
        failures.join("\n")
    );
}

/// The checker itself: an upward import, a path through `super::`, a
/// grouped `use`, one hidden in a comment, a string or a test module.
#[test]
fn the_checker_sees_imports_and_ignores_comments_strings_and_tests() {
    let modules: BTreeSet<String> = ["slot", "sampler", "sampler/grouped", "storage", "lib"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let text = r#"
        //! Mentions crate::sampler in a doc comment.
        use super::super::storage::Slots; // crate::sampler in a comment
        use crate::{sampler::{self, Sampler}, storage::prefetch};
        /* crate::sampler in a block comment */
        fn f() -> char { let _s = "crate::sampler"; let _c = '"'; crate::lib_item(); 'x' }
        #[cfg(all(test, not(loom)))]
        mod tests { use crate::sampler::Sampler; }
    "#;
    let found: Vec<(String, String)> = layering_check::imports("sampler/grouped", text, &modules)
        .into_iter()
        .map(|i| (i.written, i.target))
        .collect();
    let expect = [
        ("super::super::storage::Slots", "storage"),
        ("crate::sampler", "sampler"),
        ("crate::sampler::Sampler", "sampler"),
        ("crate::storage::prefetch", "storage"),
        ("crate::lib_item", "lib"),
    ];
    let expect: Vec<(String, String)> = expect
        .iter()
        .map(|(w, t)| (w.to_string(), t.to_string()))
        .collect();
    assert_eq!(found, expect);
}
