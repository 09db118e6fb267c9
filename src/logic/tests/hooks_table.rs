// SPDX-License-Identifier: GPL-2.0
//! The kernel hooks listed in Documentation/unwind-deferred.rst ("Kernel hooks") are those
//! of the module's table, src/hooks.h, in the same order, with the same kind and need.
#![cfg(not(loom))]

const TABLE: &str = include_str!("../../hooks.h");
const DOC: &str = include_str!("../../../Documentation/unwind-deferred.rst");

/// `(name, kind, need)` of each entry of the `UD_HOOKS` X-macro.
fn table_entries(src: &str) -> Vec<(String, String, String)> {
    let start = src
        .find("#define UD_HOOKS(")
        .expect("UD_HOOKS in src/hooks.h");
    let end = src[start..].find("\n\n").map_or(src.len(), |e| start + e);
    let mut entries = Vec::new();
    for line in src[start..end].lines().skip(1) {
        let line = line.trim();
        let (macro_name, rest) = match line.split_once('(') {
            Some((m, rest)) if ["FUNC", "DATA", "PROBE"].contains(&m) => (m, rest),
            _ => continue,
        };
        let fields: Vec<&str> = rest.split(',').map(str::trim).collect();
        let (name, kind, need) = match macro_name {
            "FUNC" => (fields[0], "function".to_string(), fields[1]),
            "DATA" => (fields[0], "variable".to_string(), fields[2]),
            _ => (fields[1], fields[0].to_lowercase(), fields[2]),
        };
        entries.push((name.to_string(), kind, need.to_lowercase()));
    }
    entries
}

/// `(name, kind, need)` of each "``name`` (kind, need)" line of the doc's hook list.
fn doc_entries(doc: &str) -> Vec<(String, String, String)> {
    let start = doc
        .find("\nKernel hooks\n")
        .expect("a 'Kernel hooks' section");
    let mut entries = Vec::new();
    for line in doc[start..].lines() {
        let Some(rest) = line.strip_prefix("``") else {
            continue;
        };
        let Some((name, rest)) = rest.split_once("`` (") else {
            continue;
        };
        let Some(rest) = rest.strip_suffix(')') else {
            continue;
        };
        let Some((kind, need)) = rest.split_once(", ") else {
            continue;
        };
        entries.push((name.to_string(), kind.to_string(), need.to_string()));
    }
    entries
}

#[test]
fn documentation_lists_the_hook_table() {
    let table = table_entries(TABLE);
    assert!(
        table.len() >= 10,
        "parsed only {} entries of src/hooks.h",
        table.len()
    );
    assert!(table
        .iter()
        .all(|(_, _, need)| need == "required" || need == "optional"));
    assert_eq!(
        doc_entries(DOC),
        table,
        "Documentation/unwind-deferred.rst vs src/hooks.h"
    );
}

#[test]
fn parsers_see_a_difference() {
    // The test above can fail: a changed need or a dropped entry is seen.
    let table = table_entries(TABLE);
    let changed = DOC.replacen(
        "``task_work_cancel`` (function, required)",
        "``task_work_cancel`` (function, optional)",
        1,
    );
    assert_ne!(doc_entries(&changed), table);
    let dropped = TABLE.replacen("FUNC(task_work_cancel", "XFUNC(task_work_cancel", 1);
    assert_eq!(table_entries(&dropped).len() + 1, table.len());
}
