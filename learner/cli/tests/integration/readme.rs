//! The README is the front door and stays one: at most 250 lines and 20 KB,
//! at most 8 headline figures, the two commands first (the test command is
//! exactly what `.ci/run` runs), and every relative link in it, in `docs/`
//! and in `benches/results/` names a file that exists. Details belong in
//! `docs/`; figures in `benches/results/`, one file per topic, whose index
//! stays an index (at most 150 lines).
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 250;
const MAX_BYTES: usize = 20 * 1024;
const MAX_HEADLINE_FIGURES: usize = 8;
const MAX_RESULTS_INDEX_LINES: usize = 150;

const TRAIN_COMMAND: &str = "cargo run --release --bin learner ";
const TEST_COMMAND: &str = "RAYON_NUM_THREADS=1 cargo test --workspace --release";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn readme() -> String {
    read(&repo_root().join("README.md"))
}

#[test]
fn readme_is_at_most_250_lines_and_20_kb() {
    let text = readme();
    let lines = text.lines().count();
    assert!(
        lines <= MAX_LINES,
        "README.md has {lines} lines (at most {MAX_LINES}): move details into docs/"
    );
    assert!(
        text.len() <= MAX_BYTES,
        "README.md has {} bytes (at most {MAX_BYTES}): move details into docs/",
        text.len()
    );
}

#[test]
fn readme_starts_with_the_two_commands_and_ci_runs_the_second() {
    let text = readme();
    let first_block = text
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README.md has a ```sh block");
    let commands: Vec<&str> = first_block.lines().collect();
    assert_eq!(
        commands.len(),
        2,
        "the first block is the two commands: {first_block}"
    );
    assert!(commands[0].starts_with(TRAIN_COMMAND), "{}", commands[0]);
    assert!(commands[1].starts_with(TEST_COMMAND), "{}", commands[1]);
    let ci = read(&repo_root().join(".ci/run"));
    assert!(
        ci.lines().any(|l| l.trim() == TEST_COMMAND),
        ".ci/run does not run the README's test command `{TEST_COMMAND}`"
    );
}

#[test]
fn readme_has_at_most_8_headline_figures() {
    let text = readme();
    let section = text
        .split("\n## Headline figures\n")
        .nth(1)
        .expect("README.md has a `## Headline figures` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let rows = section
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(2) // the header and its rule
        .count();
    assert!(
        (1..=MAX_HEADLINE_FIGURES).contains(&rows),
        "{rows} headline figures (1 to {MAX_HEADLINE_FIGURES}); the full table is docs/performance.md"
    );
}

/// The targets of `](target)` links that are neither web addresses nor
/// anchors in the same page, without their `#anchor`.
fn relative_links(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|t| !t.starts_with("http") && !t.starts_with('#') && !t.starts_with("mailto:"))
        .map(|t| t.split('#').next().unwrap_or(t).to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

#[test]
fn links_in_the_readme_docs_and_results_name_existing_files() {
    let root = repo_root();
    let mut pages = vec![root.join("README.md")];
    for folder in ["docs", "benches/results"] {
        for entry in std::fs::read_dir(root.join(folder)).expect(folder) {
            let path = entry.expect("a folder entry").path();
            if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let dir = page.parent().expect("a page has a folder");
        for link in relative_links(&read(page)) {
            if !dir.join(&link).exists() {
                broken.push(format!("{}: {link}", page.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to missing files:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_results_index_is_an_index() {
    let path = repo_root().join("benches/results/README.md");
    let text = read(&path);
    let lines = text.lines().count();
    assert!(
        lines <= MAX_RESULTS_INDEX_LINES,
        "benches/results/README.md has {lines} lines (at most {MAX_RESULTS_INDEX_LINES}): \
         figures belong in the topic files it lists"
    );
    let topics: Vec<String> = std::fs::read_dir(repo_root().join("benches/results"))
        .expect("benches/results/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md") && !p.ends_with("README.md"))
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    assert!(topics.len() >= 3, "topic files: {topics:?}");
    for topic in &topics {
        assert!(
            relative_links(&text).iter().any(|l| l == topic),
            "benches/results/README.md does not list {topic}"
        );
    }
}

#[test]
fn relative_links_skips_web_addresses_and_anchors() {
    let text = "[a](docs/x.md#y) [b](https://e.org) [c](#here) [d](../y.md)";
    assert_eq!(relative_links(text), vec!["docs/x.md", "../y.md"]);
}
