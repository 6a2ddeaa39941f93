//! The two faces of a [`Hang`]: text, one block per rank then the graph, and JSON.

use super::{Hang, Message, ThreadState, Wait, WaitKind};
use crate::model::Value;
pub(super) use crate::units::duration;
use crate::units::plural;
use crate::why::render::value_json;
use serde_json::{json, Map, Value as Json};
use std::fmt::Write;

/// The version of the JSON shape [`Hang::to_json`] writes.
pub const JSON_VERSION: u64 = 1;

impl Hang {
    /// A readable report: one block per rank (process) with the spans each thread was still
    /// inside, innermost first, and for how long; then the wait-for graph, the unmatched sends
    /// and receives, and one `deadlock: rank 0 -> rank 1 -> rank 0` line per cycle. A run
    /// that finished cleanly reads "nothing is stuck".
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if !self.stuck() {
            let _ = writeln!(
                out,
                "nothing is stuck: no thread of the {} was inside a span when its recording ended",
                plural(self.processes.len(), "process", "processes")
            );
        }
        for (p, process) in self.processes.iter().enumerate() {
            let threads: Vec<&ThreadState> =
                self.threads.iter().filter(|t| t.process == p && !t.open.is_empty()).collect();
            if threads.is_empty() && !self.stuck() {
                continue;
            }
            let closed = if process.complete { "closed cleanly" } else { "not closed cleanly" };
            let _ = writeln!(
                out,
                "{} ({}, pid {}): {closed}",
                rank_name(process.rank, &process.file),
                process.file,
                process.pid
            );
            if threads.is_empty() {
                out.push_str("  nothing open\n");
            }
            for t in threads {
                let _ = writeln!(out, "  thread {}", thread_name(&t.name, t.tid));
                let width = t.open.iter().map(|o| o.name.chars().count()).max().unwrap_or(0);
                for o in &t.open {
                    let fields: Vec<String> =
                        o.fields.iter().map(|(k, v)| format!("{k}={}", value_text(v))).collect();
                    let line = format!(
                        "    {:width$}  open for {}  {}",
                        o.name,
                        duration(o.for_ns),
                        fields.join(" ")
                    );
                    let _ = writeln!(out, "{}", line.trim_end());
                }
            }
        }
        if !self.waits.is_empty() {
            out.push_str("\nwait-for graph\n");
            for w in &self.waits {
                let _ = writeln!(out, "  rank {} -> rank {}  {}", w.from, w.to, wait_text(w));
            }
        } else if self.stuck() {
            out.push_str("\nwait-for graph: no rank waits for another in the MPI calls recorded\n");
        }
        for (title, list, dir) in [
            ("unmatched sends", &self.unmatched_sends, "to"),
            ("unmatched receives", &self.unmatched_receives, "from"),
        ] {
            if !list.is_empty() {
                let _ = writeln!(out, "\n{title}");
                for m in list {
                    let _ = writeln!(out, "  {}", message_text(m, dir));
                }
            }
        }
        if !self.deadlocks.is_empty() || !self.waits.is_empty() {
            out.push('\n');
        }
        for d in &self.deadlocks {
            let mut ranks: Vec<String> = d.ranks.iter().map(|r| format!("rank {r}")).collect();
            ranks.push(format!("rank {}", d.ranks[0]));
            let _ = writeln!(out, "deadlock: {}", ranks.join(" -> "));
        }
        if self.deadlocks_truncated {
            let _ = writeln!(out, "(only the first {} deadlocks are listed)", self.deadlocks.len());
        }
        if self.deadlocks.is_empty() && !self.waits.is_empty() {
            out.push_str("no deadlock: the waits form no cycle\n");
        }
        out
    }

    /// The report as JSON, in this shape (version 1; times in ns; ranks are the `rank`
    /// labels as numbers, null when a process has none):
    ///
    /// ```text
    /// { "version": 1,
    ///   "stuck": true,
    ///   "processes": [ { "rank": 0, "file": "rank0.bin", "pid": 1, "last_ns": 1700000000000000000,
    ///                    "complete": false }, ... ],
    ///   "threads": [ { "rank": 0, "file": "rank0.bin", "thread": "main", "tid": 1,
    ///                  "open": [ { "name": "MPI_Recv", "id": "<16 hex digits>",
    ///                              "for_ns": 2000000000, "fields": { "peer": 1, ... } }, ... ] },
    ///                ... ],                         // every thread; innermost span first
    ///   "waits": [ { "from": 0, "to": 1, "call": "MPI_Waitall", "kind": "receive" | "send"
    ///                | "request" | "collective", "request": 3 | null,
    ///                "started_by": "MPI_Irecv" | null, "comm": 5 | null, "tag": 7 | null,
    ///                "file": "rank0.bin" }, ... ],
    ///   "unmatched_sends": [ MESSAGE, ... ],
    ///   "unmatched_receives": [ MESSAGE, ... ],
    ///   "deadlocks": [ { "ranks": [0, 1, 2] }, ... ],   // from the lowest rank
    ///   "deadlocks_truncated": false }
    /// MESSAGE = { "rank": 1, "file": "rank1.bin", "call": "MPI_Send", "peer": 2, "comm": 5,
    ///             "tag": 7, "bytes": 8, "request": null, "open": true }
    /// ```
    pub fn to_json(&self) -> Json {
        let processes: Vec<Json> = self
            .processes
            .iter()
            .map(|p| json!({ "rank": p.rank, "file": p.file, "pid": p.pid, "last_ns": p.last_ns, "complete": p.complete }))
            .collect();
        let threads: Vec<Json> = self
            .threads
            .iter()
            .map(|t| {
                let open: Vec<Json> = t
                    .open
                    .iter()
                    .map(|o| {
                        let fields: Map<String, Json> =
                            o.fields.iter().map(|(k, v)| (k.clone(), value_json(v))).collect();
                        json!({ "name": o.name, "id": format!("{:016x}", o.id), "for_ns": o.for_ns, "fields": fields })
                    })
                    .collect();
                json!({ "rank": t.rank, "file": t.file, "thread": t.name, "tid": t.tid, "open": open })
            })
            .collect();
        let waits: Vec<Json> = self
            .waits
            .iter()
            .map(|w| {
                let (kind, request) = match w.kind {
                    WaitKind::Receive => ("receive", None),
                    WaitKind::Send => ("send", None),
                    WaitKind::Request(r) => ("request", Some(r)),
                    WaitKind::Collective => ("collective", None),
                };
                json!({
                    "from": w.from, "to": w.to, "call": w.call, "kind": kind, "request": request,
                    "started_by": w.started_by, "comm": w.comm, "tag": w.tag,
                    "file": self.processes[w.at.process].file,
                })
            })
            .collect();
        json!({
            "version": JSON_VERSION,
            "stuck": self.stuck(),
            "processes": processes,
            "threads": threads,
            "waits": waits,
            "unmatched_sends": self.unmatched_sends.iter().map(message_json).collect::<Vec<_>>(),
            "unmatched_receives": self.unmatched_receives.iter().map(message_json).collect::<Vec<_>>(),
            "deadlocks": self.deadlocks.iter().map(|d| json!({ "ranks": d.ranks })).collect::<Vec<_>>(),
            "deadlocks_truncated": self.deadlocks_truncated,
        })
    }
}

fn message_json(m: &Message) -> Json {
    json!({
        "rank": m.rank, "file": m.file, "call": m.call, "peer": m.peer, "comm": m.comm,
        "tag": m.tag, "bytes": m.bytes, "request": m.request, "open": m.open,
    })
}

/// `rank 3`, or the file for a process without a rank.
fn rank_name(rank: Option<i64>, file: &str) -> String {
    rank.map_or_else(|| file.to_owned(), |r| format!("rank {r}"))
}

fn thread_name(name: &str, tid: u64) -> String {
    if name.is_empty() {
        format!("tid {tid}")
    } else {
        format!("{name} (tid {tid})")
    }
}

/// What a wait is on: `MPI_Recv (comm 5, tag 7)`, `MPI_Waitall: request 3 (MPI_Irecv, ...)`,
/// `MPI_Allreduce (comm 5): not entered there`.
fn wait_text(w: &Wait) -> String {
    let mut on = Vec::new();
    if let Some(c) = w.comm {
        on.push(format!("comm {c}"));
    }
    if let Some(t) = w.tag {
        on.push(if t == -1 { "any tag".to_owned() } else { format!("tag {t}") });
    }
    let on = on.join(", ");
    match (w.kind, &w.started_by) {
        (WaitKind::Request(r), Some(start)) if on.is_empty() => format!("{}: request {r} ({start})", w.call),
        (WaitKind::Request(r), Some(start)) => format!("{}: request {r} ({start}, {on})", w.call),
        (WaitKind::Collective, _) => format!("{} ({on}): rank {} has not entered it", w.call, w.to),
        (WaitKind::Send, _) => format!("{} ({on}): not received", w.call),
        _ if on.is_empty() => w.call.clone(),
        _ => format!("{} ({on})", w.call),
    }
}

/// `rank 1 MPI_Send to rank 2 (comm 5, tag 7, 8 bytes), still open`.
fn message_text(m: &Message, dir: &str) -> String {
    let peer = match m.peer {
        Some(-1) => "any source".to_owned(),
        Some(p) => format!("rank {p}"),
        None => "?".to_owned(),
    };
    let mut about = Vec::new();
    about.extend(m.comm.map(|c| format!("comm {c}")));
    about.extend(m.tag.map(|t| if t == -1 { "any tag".to_owned() } else { format!("tag {t}") }));
    about.extend(m.bytes.map(|b| format!("{b} bytes")));
    about.extend(m.request.map(|r| format!("request {r}")));
    let mut text = format!("{} {} {dir} {peer}", rank_name(m.rank, &m.file), m.call);
    if !about.is_empty() {
        let _ = write!(text, " ({})", about.join(", "));
    }
    if m.open {
        text.push_str(", still open");
    }
    text
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Str(s) => format!("{s:?}"),
        v => v.to_string(),
    }
}
