//! The workspace's floor plan, enforced: each crate sits in the top-level
//! folder its dependencies put it in. The folders are layers, bottom first
//! ([`LAYERS`]); a crate's dependencies (normal and build; dev-dependencies
//! are test scaffolding) are crates of its own top-level folder or of a
//! lower layer, never of a sibling or a higher one.
//!
//! Why: the Python package's crate once sat under `actor/` while it embedded
//! the learner and the replay server, so the actor's folder imported the
//! learner's: the one arrow of the house that ran back up. CONTRIBUTING.md's
//! layout states the same table.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Top-level folders, bottom first.
const LAYERS: &[(&str, &[&str])] = &[
    ("the wire contract, specs, envs, shared set-up", &["shared"]),
    ("the actor", &["actor"]),
    (
        "the learner, its replay and its command (whose `learner actor` embeds the actor)",
        &["learner"],
    ),
    (
        "what embeds the whole system: the Python package, the benchmarks",
        &["python", "benches"],
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn manifest(dir: &Path) -> toml::Table {
    let path = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.parse()
        .unwrap_or_else(|e| panic!("{path:?} is not TOML: {e}"))
}

fn top_folder(path: &str) -> String {
    path.split('/').next().unwrap_or_default().to_owned()
}

fn rank(folder: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, fs)| fs.contains(&folder))
}

#[test]
fn every_crate_depends_only_on_its_own_folder_or_lower_layers() {
    let workspace = manifest(&root());
    let members: Vec<String> = workspace["workspace"]["members"]
        .as_array()
        .expect("workspace.members")
        .iter()
        .map(|m| m.as_str().expect("a member path").to_owned())
        .collect();
    // Crate name -> its folder, from the members' own manifests.
    let mut folder_of: BTreeMap<String, String> = BTreeMap::new();
    for m in &members {
        let name = manifest(&root().join(m))["package"]["name"]
            .as_str()
            .expect("package.name")
            .to_owned();
        folder_of.insert(name, m.clone());
    }
    let mut failures = Vec::new();
    for m in &members {
        let Some(own) = rank(&top_folder(m)) else {
            failures.push(format!(
                "{m}: the top-level folder `{}` has no layer in LAYERS",
                top_folder(m)
            ));
            continue;
        };
        let crate_manifest = manifest(&root().join(m));
        for section in ["dependencies", "build-dependencies"] {
            let Some(deps) = crate_manifest.get(section).and_then(|d| d.as_table()) else {
                continue;
            };
            for dep in deps.keys() {
                let Some(dep_folder) = folder_of.get(dep) else {
                    continue; // not a workspace crate
                };
                let (mine, theirs) = (top_folder(m), top_folder(dep_folder));
                if mine == theirs {
                    continue;
                }
                match rank(&theirs) {
                    Some(r) if r < own => {}
                    _ => failures.push(format!(
                        "{m} ({section}) depends on `{dep}` in {dep_folder}/: `{theirs}/` is not a \
                         lower layer than `{mine}/` (move the crate where its dependencies put it)"
                    )),
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the workspace's layering is broken:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_layers_name_every_top_level_folder_with_a_crate() {
    let workspace = manifest(&root());
    for m in workspace["workspace"]["members"]
        .as_array()
        .expect("members")
    {
        let folder = top_folder(m.as_str().expect("a path"));
        assert!(
            rank(&folder).is_some(),
            "`{folder}/` holds a crate but no layer"
        );
    }
    for (_, folders) in LAYERS {
        for f in *folders {
            assert!(
                root().join(f).is_dir(),
                "LAYERS names `{f}/`, which is no folder"
            );
        }
    }
}
