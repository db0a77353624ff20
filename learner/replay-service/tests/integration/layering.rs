//! The service crate's floor plan, enforced: every file under `src/` may
//! import only its own layer or a lower one (the list in `lib.rs`'s docs),
//! no files import each other in a loop, and the client imports only the
//! leaves, never the server or the config.
//!
//! Why: the client is what other processes (the learner, actors' hosts,
//! the Python bindings) link; if it reached into `server/` it would drag the
//! tables and the buffer's tonic service along, and a change to the server
//! could break every client. A folder's entry covers every file in it, so a
//! new file under `server/` or `client/` needs no edit here; a new top-level
//! module must be given a layer below, or this test fails. The checker is
//! the dev-only crate `seed-layering-check` (`shared/layering-check/`),
//! which every crate's layering test shares.
use std::collections::BTreeSet;
use std::path::Path;

use seed_layering_check as layering_check;

use layering_check::Layers;

/// The layers, bottom first: a module path (`config` is `src/config.rs`)
/// or a folder (`server` covers `src/server/mod.rs` and everything under
/// `src/server/`).
const LAYERS: Layers = &[
    (
        "leaves: the generated protocol, dtypes on the wire, errors, the token check",
        LEAVES,
    ),
    ("the configuration file", &["config"]),
    // Below the server: a mirror follows its primary through the client.
    ("the client", &["client"]),
    (
        "the server: tables, the service, its streams, TLS, start-up, mirrors",
        &["server"],
    ),
    (
        "the binary's flags (the server's default address)",
        &["cli"],
    ),
    (
        "the command: flags to a running server, logging, the exit code",
        &["command"],
    ),
    ("re-exports", &["lib"]),
    ("the binary's wiring", &["main"]),
];

/// The bottom layer.
const LEAVES: &[&str] = &["pb", "wire_dtype", "error", "token"];

/// Folders that may import only the leaves and their own files, whatever
/// their rank: (folder, why).
const LEAVES_ONLY: &[(&str, &str)] = &[(
    "client",
    "the client is linked by other processes and must not pull in the server or its config",
)];

#[test]
fn every_file_imports_only_its_own_or_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let failures = layering_check::check(&src, LAYERS, &[]);
    assert!(
        failures.is_empty(),
        "layering broken:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_client_imports_only_the_leaves() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules_under(&src, Path::new(""));
    let mut failures = Vec::new();
    for (folder, why) in LEAVES_ONLY {
        let inside: Vec<&String> = modules.iter().filter(|m| in_folder(m, folder)).collect();
        assert!(!inside.is_empty(), "no files under src/{folder}/");
        for module in inside {
            let text =
                std::fs::read_to_string(src.join(file_of(&src, module))).expect("readable source");
            failures.extend(leaves_only_violations(module, &text, &modules, folder, why));
        }
    }
    assert!(
        failures.is_empty(),
        "layering broken:\n{}",
        failures.join("\n")
    );
}

/// The extra rule itself: an import of the server, of the config or of a
/// nested server file is reported; the leaves, the client's own files and
/// test modules are not.
#[test]
fn the_leaves_only_rule_sees_server_and_config_imports() {
    let modules: BTreeSet<String> = [
        "pb",
        "error",
        "config",
        "server",
        "server/table",
        "client",
        "client/insert_batch",
        "client/replay_client",
        "lib",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let text = r#"
        use crate::error::ClientError;
        use crate::pb::{self, FieldBlock};
        use super::insert_batch::InsertBatch;
        use crate::{config::TableSpec, server::table::Table};
        fn f() { let _ = crate::server::DEFAULT_LISTEN; }
        #[cfg(test)]
        mod tests { use crate::server::start; }
    "#;
    let found = leaves_only_violations("client/replay_client", text, &modules, "client", "why");
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found[0].contains("`crate::config::TableSpec`"),
        "{}",
        found[0]
    );
    assert!(
        found[1].contains("`crate::server::table::Table`"),
        "{}",
        found[1]
    );
    assert!(
        found[2].contains("`crate::server::DEFAULT_LISTEN`"),
        "{}",
        found[2]
    );
}

/// Imports in `module` (a file under `folder`) of anything but the leaves
/// and `folder`'s own files.
fn leaves_only_violations(
    module: &str,
    text: &str,
    modules: &BTreeSet<String>,
    folder: &str,
    why: &str,
) -> Vec<String> {
    layering_check::imports(module, text, modules)
        .into_iter()
        .filter(|i| !LEAVES.contains(&i.target.as_str()) && !in_folder(&i.target, folder))
        .map(|i| {
            format!(
                "src/{module}.rs imports `{}` (module `{}`): files under {folder}/ may import \
                 only {} and each other ({why})",
                i.written,
                i.target,
                LEAVES.join(", ")
            )
        })
        .collect()
}

fn in_folder(module: &str, folder: &str) -> bool {
    module == folder || module.starts_with(&format!("{folder}/"))
}

/// Module paths of the `.rs` files under `src/rel` (`client/mod.rs` is
/// `client`).
fn modules_under(src: &Path, rel: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(src.join(rel)).expect("readable src dir") {
        let path = entry.expect("dir entry").path();
        let name = path
            .file_name()
            .expect("a name")
            .to_string_lossy()
            .into_owned();
        let child = rel.join(&name);
        if path.is_dir() {
            out.extend(modules_under(src, &child));
        } else if let Some(stem) = name.strip_suffix(".rs") {
            let module = if stem == "mod" {
                rel.to_string_lossy().into_owned()
            } else {
                rel.join(stem).to_string_lossy().into_owned()
            };
            out.insert(module);
        }
    }
    out
}

/// The file of a module path (`client` -> `client/mod.rs`).
fn file_of(src: &Path, module: &str) -> std::path::PathBuf {
    let direct = Path::new(module).with_extension("rs");
    if src.join(&direct).is_file() {
        direct
    } else {
        Path::new(module).join("mod.rs")
    }
}
