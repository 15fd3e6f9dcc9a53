//! No import circle between the files of `src/storage`: every path a file names into the room
//! (`use` lines, inline `crate::storage::…`/`super::…` paths; re-exports followed to the file
//! that defines the item; test modules and `pub use` lines left out) is an edge, and the graph
//! of those edges must have no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside `storage` (`["history", "keys"]`), by file.
type ModPath = Vec<String>;

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("reading src/storage") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn mod_path(root: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(root).expect("a file under the root").with_extension("");
    let mut parts: ModPath = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The source without comments, `#[cfg(test)]` modules and `pub(in …)` visibilities.
fn code(src: &str) -> String {
    let mut out: String = src
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    while let Some(at) = out.find("#[cfg(test)]") {
        let rest = &out[at..];
        let Some(open) = rest.find('{') else { break };
        let header = &rest[..open];
        if !header.contains("mod ") || header.contains(';') {
            out.replace_range(at..at + "#[cfg(test)]".len(), "");
            continue;
        }
        let mut depth = 0usize;
        let mut end = rest.len();
        for (i, c) in rest.char_indices().skip(open) {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.replace_range(at..at + end, "");
    }
    while let Some(at) = out.find("pub(in ") {
        let end = out[at..].find(')').map_or(out.len(), |e| at + e + 1);
        out.replace_range(at..end, "pub(crate)");
    }
    out
}

/// The paths of a use tree (`a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`).
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or("");
        return vec![path.chars().filter(|c| !c.is_whitespace()).collect()];
    };
    let prefix: String = tree[..open].chars().filter(|c| !c.is_whitespace()).collect();
    let inner = &tree[open + 1..tree.len() - 1];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|p| match p.as_str() {
            "self" => prefix.trim_end_matches("::").to_string(),
            _ => prefix.clone() + &p,
        })
        .collect()
}

/// The use trees of the `use` statements (`public`: of the `pub use` ones only).
fn uses(code: &str, public: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = code[at..].find("use ") {
        let start = at + i;
        at = start + 4;
        let before = code[..start].trim_end();
        let is_pub = ["pub", "pub(crate)", "pub(super)"].iter().any(|v| before.ends_with(v));
        let word_start = start == 0 || !code.as_bytes()[start - 1].is_ascii_alphanumeric();
        if !word_start || is_pub != public {
            continue;
        }
        if let Some(end) = code[at..].find(';') {
            out.extend(expand(&code[at..at + end]));
        }
    }
    out
}

/// The code without its `use` statements.
fn without_uses(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let word_start = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        let Some(end) = rest[i..].find(';').filter(|_| word_start) else {
            out.push_str(&rest[..i + 4]);
            rest = &rest[i + 4..];
            continue;
        };
        out.push_str(&rest[..i]);
        rest = &rest[i + end + 1..];
    }
    out.push_str(rest);
    out
}

/// Whether `code` names `word` as a whole identifier.
fn names_word(code: &str, word: &str) -> bool {
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    code.match_indices(word).any(|(i, _)| {
        let before = i.checked_sub(1).map(|j| code.as_bytes()[j]);
        let after = code.as_bytes().get(i + word.len()).copied();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

struct Room {
    by_mod: BTreeMap<ModPath, PathBuf>,
    defs: BTreeMap<PathBuf, BTreeSet<String>>,
    reexports: BTreeMap<PathBuf, Vec<String>>,
}

impl Room {
    /// The file that defines what `path`, named in module `here`, names (`None`: outside the
    /// room).
    fn resolve(&self, here: &ModPath, path: &str) -> Option<PathBuf> {
        self.resolve_at(here, path, 0)
    }

    /// [`Room::resolve`], `depth` re-exports deep (a re-export of itself resolves to nothing).
    fn resolve_at(&self, here: &ModPath, path: &str, depth: usize) -> Option<PathBuf> {
        if depth > 16 {
            return None;
        }
        let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        let (mut module, mut rest) = match segs.first()? {
            &"crate" if segs.get(1) == Some(&"storage") => (Vec::new(), &segs[2..]),
            &"super" | &"self" => {
                let mut m = here.clone();
                let mut i = 0;
                while let Some(s) = segs.get(i).filter(|s| **s == "super" || **s == "self") {
                    if *s == "super" {
                        m.pop();
                    }
                    i += 1;
                }
                (m, &segs[i..])
            }
            first => {
                let mut m = here.clone();
                m.push(first.to_string());
                if !self.by_mod.contains_key(&m) {
                    return None;
                }
                (here.clone(), &segs[..])
            }
        };
        while let Some(next) = rest.first() {
            let mut m = module.clone();
            m.push(next.to_string());
            if !self.by_mod.contains_key(&m) {
                break;
            }
            module = m;
            rest = &rest[1..];
        }
        let file = self.by_mod.get(&module)?;
        let Some(name) = rest.first() else { return Some(file.clone()) };
        if self.defs[file].contains(*name) {
            return Some(file.clone());
        }
        for re in &self.reexports[file] {
            if re.rsplit("::").next() == Some(name) {
                let full = if re.starts_with("crate") || re.starts_with("super") {
                    re.clone()
                } else {
                    format!("self::{re}")
                };
                if let Some(found) = self.resolve_at(&module, &full, depth + 1) {
                    return Some(found);
                }
            }
        }
        Some(file.clone())
    }
}

#[test]
fn storage_files_import_each_other_without_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/storage");
    let mut all = Vec::new();
    files(&root, &mut all);
    let sources: BTreeMap<PathBuf, String> = all
        .iter()
        .map(|f| (f.clone(), code(&std::fs::read_to_string(f).expect("reading a storage file"))))
        .collect();
    let keywords = ["fn ", "struct ", "enum ", "const ", "type ", "trait ", "static ", "mod "];
    let room = Room {
        by_mod: all.iter().map(|f| (mod_path(&root, f), f.clone())).collect(),
        defs: sources
            .iter()
            .map(|(f, src)| {
                let names = src
                    .lines()
                    .filter_map(|l| {
                        let l = l.trim_start();
                        let l = ["pub(crate) ", "pub(super) ", "pub "]
                            .iter()
                            .find_map(|v| l.strip_prefix(v))
                            .unwrap_or(l);
                        let kw = keywords.iter().find(|k| l.starts_with(**k))?;
                        let name: String = l[kw.len()..]
                            .trim_start_matches("fn ")
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        Some(name)
                    })
                    .collect();
                (f.clone(), names)
            })
            .collect(),
        reexports: sources.iter().map(|(f, src)| (f.clone(), uses(src, true))).collect(),
    };
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (file, src) in &sources {
        let here = mod_path(&root, file);
        let mut to = BTreeSet::new();
        for path in uses(src, false) {
            to.extend(room.resolve(&here, &path));
        }
        // A re-export is an edge only where this file's own code uses the item.
        let body = without_uses(src);
        for path in uses(src, true) {
            let name = path.rsplit("::").next().unwrap_or_default();
            if names_word(&body, name) {
                let path = if path.starts_with("crate") || path.starts_with("super") {
                    path
                } else {
                    format!("self::{path}")
                };
                to.extend(room.resolve(&here, &path));
            }
        }
        // Inline paths: `a::b::c` outside use statements.
        let src = &body;
        let bytes = src.as_bytes();
        let mut i = 0;
        while let Some(at) = src[i..].find("::") {
            let sep = i + at;
            i = sep + 2;
            let mut start = sep;
            while start > 0
                && (bytes[start - 1].is_ascii_alphanumeric()
                    || bytes[start - 1] == b'_'
                    || bytes[start - 1] == b':')
            {
                start -= 1;
            }
            let mut end = sep + 2;
            while end < bytes.len()
                && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_' || bytes[end] == b':')
            {
                end += 1;
            }
            i = i.max(end);
            to.extend(room.resolve(&here, src[start..end].trim_end_matches(':')));
        }
        to.remove(file);
        edges.insert(file.clone(), to);
    }
    // A cycle: a file reached again while it is on the depth-first path.
    fn visit(
        f: &PathBuf,
        edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        path: &mut Vec<PathBuf>,
        done: &mut BTreeSet<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        if let Some(i) = path.iter().position(|p| p == f) {
            return Some(path[i..].to_vec());
        }
        if !done.insert(f.clone()) {
            return None;
        }
        path.push(f.clone());
        for g in edges.get(f).into_iter().flatten() {
            if let Some(cycle) = visit(g, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for f in edges.keys() {
        let cycle = visit(f, &edges, &mut Vec::new(), &mut done);
        let names: Vec<String> = cycle
            .unwrap_or_default()
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap_or(p).display().to_string())
            .collect();
        assert!(names.is_empty(), "an import circle in src/storage: {}", names.join(" -> "));
    }
}
