//! The layering checker (dev-only) of the `layering` tests of
//! `seed-replay`, `seed-replay-service` and `seed-learner`: reads a crate's
//! sources as text and reports imports that go up its stated layers, and
//! import cycles between its files.
//!
//! How: each `src/**/*.rs` but a `tests.rs` is read as text; comments,
//! string and char literals, and `#[cfg(..test..)] mod tests { .. }` bodies
//! are dropped; then every `crate::`, `super::` and `self::` path, and
//! every `use` of a child module, is resolved to the file it names (the longest module prefix of
//! the path; a path that names no module below the root names `lib`).
//! `super::` is resolved from the file's own module: inline `mod { }` blocks
//! are not tracked, so code inside them names crate items by `crate::` paths.
//! Cost: reading a few hundred KB of source, a few milliseconds.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers, bottom first: (what they are, module paths). A module path names
/// a file (`sampler/fifo` is `src/sampler/fifo.rs`, `sampler` is
/// `src/sampler/mod.rs`, `lib` is `src/lib.rs`) or, when no entry names a
/// file itself, the nearest enclosing folder's entry gives its layer.
pub type Layers = &'static [(&'static str, &'static [&'static str])];

/// Every broken rule in the crate whose sources are in `src` (folders
/// `skip` left out): a file in no layer, an entry naming nothing, an import
/// of a higher layer, an import cycle. Empty when the layering holds.
pub fn check(src: &Path, layers: Layers, skip: &[&str]) -> Vec<String> {
    let files = source_files(src, skip);
    assert!(
        files.len() > 10,
        "found only {} files in {src:?}",
        files.len()
    );
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let ranks = ranks(layers);
    let mut failures = Vec::new();
    for name in &modules {
        if rank_of(&ranks, name).is_none() {
            failures.push(format!(
                "src/{}: module `{name}` has no layer: add it to the layers in the crate's \
                 tests/integration/layering.rs (and to the list in lib.rs)",
                files[name].display()
            ));
        }
    }
    for name in ranks.keys() {
        let prefix = format!("{name}/");
        if !modules.iter().any(|m| m == name || m.starts_with(&prefix)) {
            failures.push(format!(
                "the layers name `{name}`, which is no file or folder in src/"
            ));
        }
    }
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, rel) in &files {
        let text = std::fs::read_to_string(src.join(rel)).expect("readable source");
        for import in imports(name, &text, &modules) {
            if import.target == *name {
                continue;
            }
            edges
                .entry(name.clone())
                .or_default()
                .insert(import.target.clone());
            let (Some((from, from_layer)), Some((to, to_layer))) =
                (rank_of(&ranks, name), rank_of(&ranks, &import.target))
            else {
                continue;
            };
            if to > from {
                failures.push(format!(
                    "src/{} imports `{}`: `{}` is in layer {to} ({to_layer}), above \
                     `{name}`'s layer {from} ({from_layer})",
                    rel.display(),
                    import.written,
                    import.target,
                ));
            }
        }
    }
    if let Some(cycle) = find_cycle(&edges) {
        failures.push(format!("import cycle: {}", cycle.join(" -> ")));
    }
    failures
}

/// One import found in a file: the path as written and the module it names.
#[derive(Debug)]
pub struct Import {
    pub written: String,
    pub target: String,
}

/// Entry of `layers` -> (layer, layer name).
fn ranks(layers: Layers) -> BTreeMap<&'static str, (usize, &'static str)> {
    let mut ranks = BTreeMap::new();
    for (layer, (what, modules)) in layers.iter().enumerate() {
        for m in *modules {
            let previous = ranks.insert(*m, (layer, *what));
            assert!(previous.is_none(), "`{m}` is in the layers twice");
        }
    }
    ranks
}

/// The layer of `module`: its own entry, else the entry of its nearest
/// enclosing folder (`learn` covers `learn/unroll` and `learn/vtrace/targets`).
fn rank_of(
    ranks: &BTreeMap<&'static str, (usize, &'static str)>,
    module: &str,
) -> Option<(usize, &'static str)> {
    let mut m = module;
    loop {
        if let Some(r) = ranks.get(m) {
            return Some(*r);
        }
        m = &m[..m.rfind('/')?];
    }
}

/// Module path -> file path relative to `src`, for every `.rs` file except
/// those under the folders `skip` (e.g. loom tests, built only under
/// `cfg(loom)`) and the test modules kept in a file of their own
/// (`tests.rs` beside a `mod.rs`): test code, like the inline test modules
/// the tokenizer drops.
fn source_files(src: &Path, skip: &[&str]) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable src dir") {
            let path = entry.expect("dir entry").path();
            let rel = path.strip_prefix(src).expect("under src").to_path_buf();
            if path.is_dir() {
                if !skip.iter().any(|s| rel == Path::new(s)) {
                    dirs.push(path);
                }
                continue;
            }
            if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("tests.rs") {
                out.insert(module_of(&rel), rel);
            }
        }
    }
    out
}

/// `sampler/fifo.rs` -> `sampler/fifo`; `sampler/mod.rs` -> `sampler`;
/// `lib.rs` -> `lib`.
fn module_of(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|l| l == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && parts[0] == "lib" {
        return "lib".into();
    }
    parts.join("/")
}

/// Segments of a module path from the crate root (`lib` is the root).
fn segments(module: &str) -> Vec<String> {
    if module == "lib" {
        Vec::new()
    } else {
        module.split('/').map(str::to_owned).collect()
    }
}

/// The crate-internal imports of one file's non-test code.
pub fn imports(module: &str, text: &str, modules: &BTreeSet<String>) -> Vec<Import> {
    let tokens = drop_test_modules(tokens(text));
    // `self` is the file's own module path (`x/mod.rs` and `x.rs` are both
    // `x`), `super` that path without its last segment.
    let self_path = segments(module);
    let parent: Vec<String> = self_path[..self_path.len().saturating_sub(1)].to_vec();
    let resolve = |path: &[String]| -> Option<Import> {
        let (mut base, rest) = match path.first().map(String::as_str) {
            Some("crate") => (Vec::new(), &path[1..]),
            Some("self") => (self_path.clone(), &path[1..]),
            Some("super") => {
                let mut base = parent.clone();
                let mut rest = &path[1..];
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                (base, rest)
            }
            // A `use` of a child module declared by this file.
            Some(first) => {
                let child = [self_path.clone(), vec![first.to_owned()]].concat();
                if !modules.contains(&child.join("/")) {
                    return None;
                }
                (self_path.clone(), path)
            }
            None => return None,
        };
        base.extend(rest.iter().cloned());
        let target = (1..=base.len())
            .rev()
            .map(|k| base[..k].join("/"))
            .find(|m| modules.contains(m))
            .unwrap_or_else(|| "lib".to_owned());
        Some(Import {
            written: path.join("::"),
            target,
        })
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        let after_colons = i > 0 && tokens[i - 1] == "::";
        if t == "use" {
            let mut paths = Vec::new();
            i = use_tree(&tokens, i + 1, Vec::new(), &mut paths);
            out.extend(paths.iter().filter_map(|p| resolve(p)));
            continue;
        }
        if matches!(t, "crate" | "super" | "self")
            && !after_colons
            && tokens.get(i + 1).is_some_and(|n| n == "::")
        {
            let mut paths = Vec::new();
            i = use_tree(&tokens, i, Vec::new(), &mut paths);
            out.extend(paths.iter().filter_map(|p| resolve(p)));
            continue;
        }
        i += 1;
    }
    out
}

/// Parses a use tree (or a plain path) at `tokens[i]`, pushing each full
/// path onto `out`; returns the index after it.
fn use_tree(
    tokens: &[String],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("{") => {
                i += 1;
                while let Some(t) = tokens.get(i) {
                    match t.as_str() {
                        "}" => return i + 1,
                        "," => i += 1,
                        // `Name as Alias`: the alias names nothing new.
                        "as" => i += 2,
                        _ => i = use_tree(tokens, i, prefix.clone(), out),
                    }
                }
                return i;
            }
            Some("*") => {
                out.push(prefix);
                return i + 1;
            }
            Some("self") if !prefix.is_empty() => {
                i += 1;
            }
            Some(t) if is_ident(t) => {
                prefix.push(t.to_owned());
                i += 1;
            }
            _ => {
                if !prefix.is_empty() {
                    out.push(prefix);
                }
                return i;
            }
        }
        if tokens.get(i).is_some_and(|t| t == "::") {
            i += 1;
            continue;
        }
        if !prefix.is_empty() {
            out.push(prefix);
        }
        return i;
    }
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Drops `#[cfg(..test..)] mod NAME { .. }`: test modules may import
/// anything.
fn drop_test_modules(tokens: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == "#" && tokens.get(i + 1).is_some_and(|t| t == "[") {
            let close = matching(&tokens, i + 1, "[", "]");
            let attr = &tokens[i + 2..close];
            let is_test_cfg =
                attr.first().is_some_and(|t| t == "cfg") && attr.iter().any(|t| t == "test");
            let is_mod = tokens.get(close + 1).is_some_and(|t| t == "mod")
                && tokens.get(close + 3).is_some_and(|t| t == "{");
            if is_test_cfg && is_mod {
                i = matching(&tokens, close + 3, "{", "}") + 1;
                continue;
            }
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    out
}

/// Index of the token closing the bracket opened at `tokens[open]`.
fn matching(tokens: &[String], open: usize, left: &str, right: &str) -> usize {
    let mut depth = 0usize;
    for (j, t) in tokens.iter().enumerate().skip(open) {
        if t == left {
            depth += 1;
        } else if t == right {
            depth -= 1;
            if depth == 0 {
                return j;
            }
        }
    }
    tokens.len()
}

/// Identifiers, `::` and single punctuation characters, with comments,
/// string, raw string and char literals, numbers and lifetimes left out.
fn tokens(text: &str) -> Vec<String> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\'') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // Raw strings: r"..", r#".."#, br"..".
            if (word == "r" || word == "br") && matches!(c.get(i), Some('"') | Some('#')) {
                let mut hashes = 0;
                while c.get(i) == Some(&'#') {
                    hashes += 1;
                    i += 1;
                }
                i += 1;
                while i < c.len() {
                    if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
                        i += 1 + hashes;
                        break;
                    }
                    i += 1;
                }
            } else {
                out.push(word);
            }
        } else if ch.is_ascii_digit() {
            // A number (`0x1f_u64`, `1.5e3`); a `.` only before a digit, so
            // `0..n` leaves the range and `n` alone.
            while i < c.len()
                && (c[i].is_alphanumeric()
                    || c[i] == '_'
                    || (c[i] == '.' && c.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
        } else if ch == ':' && next == Some(':') {
            out.push("::".to_owned());
            i += 2;
        } else {
            if !ch.is_whitespace() {
                out.push(ch.to_string());
            }
            i += 1;
        }
    }
    out
}

/// A loop in the import graph, if there is one (files in order, the first
/// repeated at the end).
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = stack.iter().position(|n| n == node).unwrap_or(0);
                let mut cycle = stack[from..].to_vec();
                cycle.push(node.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.to_owned(), Mark::Open);
        stack.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, marks, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        marks.insert(node.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in edges.keys() {
        let mut stack = Vec::new();
        if let Some(cycle) = visit(node, edges, &mut marks, &mut stack) {
            return Some(cycle);
        }
    }
    None
}
