//! The layer order of ARCHITECTURE.md, enforced: a module may import only modules on
//! lower layers. Reads every file under `src/` and fails on an import that runs the
//! other way (which also rules out cycles between modules), and on a top-level module
//! that has no layer yet.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Bottom to top. Modules on one layer may not import each other.
const LAYERS: &[&[&str]] = &[
    &["types", "http", "sandbox"],
    &["config", "metrics", "telemetry"],
    &["tokens"],
    &["provider"],
    &["store"],
    &["files"],
    &["skills"],
    &["tools"],
    &["integrations"],
    &["triggers"],
    &["run"],
    &["evals"],
    &["server"],
    &["cli"],
];

fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file under `src/` belongs to (`src/run/llm.rs` → `run`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// Top-level modules named after `crate::` in `code`, with the line they are on:
/// `crate::run::X`, and each item of `crate::{run::X, store::Y}`.
fn crate_imports(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut line_no = 1;
    let bytes = code.as_bytes();
    let mut i = 0;
    // Line comments (doc comments included) are not imports.
    let mut in_comment = false;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\n' {
            line_no += 1;
            in_comment = false;
            i += 1;
            continue;
        }
        if !in_comment && bytes[i..].starts_with(b"//") {
            in_comment = true;
        }
        if in_comment || !bytes[i..].starts_with(b"crate::") {
            i += 1;
            continue;
        }
        // `crate::` preceded by an identifier character is some other path (`mycrate::`).
        if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
            i += 1;
            continue;
        }
        i += "crate::".len();
        if bytes[i..].starts_with(b"{") {
            // A group: the first identifier of each top-level item.
            let mut depth = 0;
            let mut at_item_start = true;
            let start_line = line_no;
            while i < bytes.len() {
                let c = bytes[i] as char;
                match c {
                    '{' => {
                        depth += 1;
                        if depth == 1 {
                            at_item_start = true;
                        }
                    }
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => at_item_start = true,
                    '\n' => line_no += 1,
                    c if at_item_start && depth == 1 && (c.is_ascii_alphabetic() || c == '_') => {
                        let ident: String = code[i..]
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        i += ident.len();
                        out.push((start_line, ident));
                        at_item_start = false;
                        continue;
                    }
                    _ => {}
                }
                i += 1;
            }
        } else {
            let ident: String = code[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            i += ident.len();
            out.push((line_no, ident));
        }
    }
    out
}

#[test]
fn imports_run_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    let mut modules = BTreeSet::new();
    for file in &files {
        let from = module_of(&src, file);
        if from == "lib" || from == "main" {
            continue;
        }
        modules.insert(from.clone());
        let Some(from_layer) = layer(&from) else {
            problems.push(format!(
                "src/{from}: a module with no layer; add it to LAYERS here and to ARCHITECTURE.md"
            ));
            continue;
        };
        let code = std::fs::read_to_string(file).unwrap();
        for (line, to) in crate_imports(&code) {
            if to == from || to == "self" {
                continue;
            }
            let Some(to_layer) = layer(&to) else {
                problems.push(format!(
                    "{}:{line}: imports `crate::{to}`, which has no layer",
                    file.display()
                ));
                continue;
            };
            if to_layer >= from_layer {
                problems.push(format!(
                    "{}:{line}: `{from}` (layer {from_layer}) imports `{to}` (layer {to_layer}); \
                     a module may import only modules on lower layers",
                    file.display()
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "layering violations:\n{}",
        problems.join("\n")
    );
    // Every module the crate declares was checked.
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    for line in lib.lines() {
        if let Some(name) = line.strip_prefix("pub mod ").and_then(|l| l.strip_suffix(';')) {
            assert!(
                layer(name).is_some(),
                "src/lib.rs declares `{name}`, which has no layer"
            );
        }
    }
}

#[test]
fn the_import_reader_sees_plain_grouped_and_nested_paths() {
    let code = "use crate::store::Store;\n\
                // use crate::server::Nope;\n\
                use crate::{config::X, files::{a, b}, tools};\n\
                let x = crate::run::go(); let y = mycrate::cli::z;\n";
    let got: Vec<(usize, String)> = crate_imports(code);
    let want: Vec<(usize, String)> = vec![
        (1, "store".into()),
        (3, "config".into()),
        (3, "files".into()),
        (3, "tools".into()),
        (4, "run".into()),
    ];
    assert_eq!(got, want);
}
