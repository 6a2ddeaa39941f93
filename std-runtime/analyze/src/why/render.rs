//! The two faces of an [`Explanation`]: an indented text tree and JSON.

use super::{Explanation, ItemInfo, Reached, Relation, Step};
use crate::model::Value;
use serde_json::{json, Map, Value as Json};
use std::fmt::Write;

/// The version of the JSON shape [`Explanation::to_json`] writes.
pub const JSON_VERSION: u64 = 3;

impl Explanation {
    /// A readable report: the symptom, the chain as an indented tree (`← caused by ...`,
    /// `← inside ...`, `← correlated with ...`, `← matched by order with ...`,
    /// `← caused by message ...`), the root causes
    /// under their own heading, and last the notes on spans not matched by order.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        out.push_str("Symptom\n");
        item_block(&mut out, 1, "", &self.symptom, "");
        out.push_str("\nCausal chain (from the symptom back)\n");
        if self.steps.is_empty() {
            out.push_str("  (nothing: the symptom has no causes, parent or correlated items)\n");
        }
        for step in &self.steps {
            step_block(&mut out, step);
        }
        out.push('\n');
        match self.root_causes.len() {
            0 => {
                out.push_str("Root cause: none found\n");
                out.push_str(&format!("  {}\n", self.conclusion()));
            }
            n => {
                out.push_str(if n == 1 { "Root cause\n" } else { "Root causes\n" });
                for r in &self.root_causes {
                    item_block(&mut out, 1, "", r, "");
                    let unknown: Vec<String> = r
                        .links
                        .iter()
                        .filter(|l| self.unknown_ids.contains(l))
                        .map(|l| format!("{l:016x}"))
                        .collect();
                    if !unknown.is_empty() {
                        let _ = writeln!(
                            out,
                            "      its recorded causes ({}) are not in these files",
                            unknown.join(", ")
                        );
                    }
                }
            }
        }
        if !self.notes.is_empty() {
            out.push_str("\nNotes\n");
            for note in &self.notes {
                let _ = writeln!(out, "  {note}");
            }
        }
        out
    }

    /// Why the root causes are what they are, in one sentence.
    pub(crate) fn conclusion(&self) -> String {
        match (self.root_causes.len(), self.links_followed) {
            (0, 0) if self.unknown_ids.is_empty() => "no causal link (caused_by) can be reached from the \
                 symptom, so no root cause can be named; the chain shows only where it happened."
                .to_owned(),
            (0, 0) => "no causal link to an item of these files can be reached from the symptom; the \
                 unknown ids above may be in files not given."
                .to_owned(),
            (0, _) => "every cause reached has causes of its own (the links form a cycle), so none is \
                 a root cause."
                .to_owned(),
            (1, _) => {
                format!("the root cause is {} {:?}.", self.root_causes[0].kind, self.root_causes[0].name)
            }
            (n, _) => format!("{n} root causes."),
        }
    }

    /// The explanation as JSON, in this shape (version 3; ids are 16 lower-case hex digits,
    /// offsets µs after the trace's earliest timestamp). Version 2 added the relation
    /// `matched by order with`, a step's `occurrence` and `notes`; version 3 the relation
    /// `caused by message` (an effect of a directed correlation to its cause).
    ///
    /// ```text
    /// { "version": 3,
    ///   "symptom": ITEM,
    ///   "steps": [ { "depth": 1,                    // edges from the symptom
    ///                "relation": "caused by" | "inside" | "correlated with"
    ///                            | "matched by order with" | "caused by message",
    ///                "occurrence": 0 | null,        // matched by order: k, from 0
    ///                "from": "<id>",                // the item it was reached from
    ///                "id": "<id>",
    ///                "status": "item" | "again" | "unknown",   // again: shown above
    ///                "item": ITEM | null }, ... ],  // null when unknown; tree order
    ///   "root_causes": [ ITEM, ... ],
    ///   "unknown_ids": [ "<id>", ... ],
    ///   "links_followed": 1,
    ///   "conclusion": "...",
    ///   "notes": [ "...", ... ] }                   // names not matched by order, and why
    /// ITEM = { "id": "<id>", "name": "...", "kind": "span" | "event",
    ///          "process": { "index": 0, "source": "rank0.bin", "pid": 1, "name": "...",
    ///                       "host": "...", "rank": "0" | null, "labels": { "rank": "0" } },
    ///          "thread": { "name": "main", "tid": 1 },
    ///          "offset_us": 812.4,
    ///          "fields": { "rank": 0, ... },       // non-finite floats as "NaN", "inf", "-inf"
    ///          "correlation": { "key": "allreduce", "value": 2 } | null,
    ///          "parent": "<id>" | null,
    ///          "links": [ "<id>", ... ] }
    /// ```
    pub fn to_json(&self) -> Json {
        let steps: Vec<Json> = self
            .steps
            .iter()
            .map(|s| {
                let status = match s.reached {
                    Reached::Item(_) => "item",
                    Reached::Again(_) => "again",
                    Reached::Unknown(_) => "unknown",
                };
                json!({
                    "depth": s.depth,
                    "relation": s.relation.as_str(),
                    "occurrence": s.occurrence,
                    "from": hex(s.from),
                    "id": hex(s.id()),
                    "status": status,
                    "item": s.item().map_or(Json::Null, item_json),
                })
            })
            .collect();
        json!({
            "version": JSON_VERSION,
            "symptom": item_json(&self.symptom),
            "steps": steps,
            "root_causes": self.root_causes.iter().map(item_json).collect::<Vec<_>>(),
            "unknown_ids": self.unknown_ids.iter().map(|&id| hex(id)).collect::<Vec<_>>(),
            "links_followed": self.links_followed,
            "conclusion": self.conclusion(),
            "notes": self.notes,
        })
    }
}

fn hex(id: u64) -> String {
    format!("{id:016x}")
}

fn item_json(i: &ItemInfo) -> Json {
    let fields: Map<String, Json> = i.fields.iter().map(|(k, v)| (k.clone(), value_json(v))).collect();
    let labels: Map<String, Json> =
        i.labels.iter().map(|(k, v)| (k.clone(), Json::from(v.as_str()))).collect();
    json!({
        "id": hex(i.id),
        "name": i.name,
        "kind": i.kind,
        "process": {
            "index": i.at.process,
            "source": i.source,
            "pid": i.pid,
            "name": i.process_name,
            "host": i.host,
            "rank": i.rank,
            "labels": labels,
        },
        "thread": { "name": i.thread_name, "tid": i.tid },
        "offset_us": i.offset_us,
        "fields": fields,
        "correlation": i.correlation.as_ref().map_or(Json::Null, |(k, v)| json!({ "key": k, "value": v })),
        "parent": i.parent.map(hex),
        "links": i.links.iter().map(|&l| hex(l)).collect::<Vec<_>>(),
    })
}

pub(crate) fn value_json(v: &Value) -> Json {
    match v {
        Value::U64(v) => json!(v),
        Value::I64(v) => json!(v),
        Value::F64(v) if v.is_finite() => json!(v),
        Value::F64(v) => json!(v.to_string()),
        Value::Bool(v) => json!(v),
        Value::Str(v) => json!(v),
    }
}

fn step_block(out: &mut String, s: &Step) {
    let indent = "  ".repeat(s.depth);
    let rel = s.relation.as_str();
    match &s.reached {
        Reached::Item(i) => {
            item_block(out, s.depth, &format!("← {rel} "), i, "");
            if let Some(k) = s.occurrence {
                let _ = writeln!(
                    out,
                    "{indent}      occurrence {k} of {:?} on each rank: matched by order, not by a recorded link",
                    i.name
                );
            }
        }
        Reached::Again(i) => item_block(out, s.depth, &format!("← {rel} "), i, " (shown above)"),
        Reached::Unknown(id) => {
            let _ = writeln!(out, "{indent}← {rel} unknown id {id:016x} (not in these files)");
        }
    }
}

/// An item as a heading line and a line of where and when, then its fields if any.
fn item_block(out: &mut String, depth: usize, lead: &str, i: &ItemInfo, tail: &str) {
    let indent = "  ".repeat(depth);
    let _ = writeln!(out, "{indent}{lead}{} {:?} {:016x}{tail}", i.kind, i.name, i.id);
    if !tail.is_empty() {
        return;
    }
    // Details line up a little right of the heading's first word ("← " counts as one).
    let pad = format!("{indent}{}", if lead.is_empty() { "    " } else { "      " });
    let process = match &i.rank {
        Some(rank) => format!("rank {rank} ({}, pid {})", i.source, i.pid),
        None => format!("{} ({}, pid {})", i.process_name, i.source, i.pid),
    };
    let thread = if i.thread_name.is_empty() {
        format!("tid {}", i.tid)
    } else {
        format!("{} (tid {})", i.thread_name, i.tid)
    };
    let _ = writeln!(out, "{pad}{process}, thread {thread}, at +{:.3} µs", i.offset_us);
    let mut fields: Vec<String> = i.fields.iter().map(|(k, v)| format!("{k}={}", value_text(v))).collect();
    if let Some((key, value)) = &i.correlation {
        fields.push(format!("[correlated: {key}={value}]"));
    }
    if !fields.is_empty() {
        let _ = writeln!(out, "{pad}{}", fields.join(" "));
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Str(s) => format!("{s:?}"),
        v => v.to_string(),
    }
}

impl std::fmt::Display for Relation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
