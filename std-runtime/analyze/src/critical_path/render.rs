//! The critical path as text for a reader, and as JSON.

use std::fmt::Write;

use serde::Serialize;
use serde_json::Value as Json;

use super::CriticalPath;
use crate::{
    json_out::{self, Hex, Seq},
    units::{duration, first_by},
};

/// Version of the JSON's shape; it changes only when a field is renamed or removed.
pub const JSON_VERSION: u32 = 1;

/// How many contributors and segments the text lists.
const LISTED: usize = 10;

impl CriticalPath {
    /// The path for a reader: its length, the largest contributors and what freeing each would
    /// gain, then the longest segments.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for note in &self.notes {
            let _ = writeln!(s, "note: {note}");
        }
        let what = self.step.map_or("the run".to_owned(), |k| format!("step {k}"));
        if self.segments.is_empty() {
            let _ = writeln!(s, "{what} has no spans: no critical path");
            return s;
        }
        let ranks: std::collections::BTreeSet<i64> = self.segments.iter().map(|x| x.rank).collect();
        let _ = writeln!(
            s,
            "critical path of {what}: {} in {} segments across {} rank(s)",
            duration(self.length_ns),
            self.segments.len(),
            ranks.len()
        );
        s += "\nlargest contributors (time on the path; the run if it took no time):\n";
        for c in self.contributors.iter().take(LISTED) {
            let share = 100.0 * c.on_path_ns as f64 / self.length_ns.max(1) as f64;
            let gain = c
                .if_free_ns
                .map_or(String::new(), |g| format!("; free, {what} would be {} shorter", duration(g)));
            let _ = writeln!(
                s,
                "  rank {} thread {}: {} {} ({share:.1} %){gain}",
                c.rank,
                c.thread,
                c.span,
                duration(c.on_path_ns)
            );
        }
        s += "\nlongest segments:\n";
        let longest = first_by(&self.segments, LISTED, |a, b| {
            b.dur_ns.cmp(&a.dur_ns).then(a.start_ns.cmp(&b.start_ns))
        });
        for x in longest {
            let at = x.start_ns.saturating_sub(self.start_ns);
            let _ = writeln!(s, "  +{}: rank {} {} for {}", duration(at), x.rank, x.span, duration(x.dur_ns));
        }
        s
    }

    /// The path as JSON (its shape in docs/waits.md).
    pub fn to_json(&self) -> Json {
        json_out::value(&self.json_shape())
    }

    /// [`to_json`](Self::to_json) written to `out` as pretty JSON while it is made, with a
    /// newline: no JSON tree is held, however many segments there are.
    pub fn write_json(&self, out: impl std::io::Write) -> std::io::Result<()> {
        json_out::write_pretty(out, &self.json_shape())
    }

    fn json_shape(&self) -> impl Serialize + '_ {
        #[derive(Serialize)]
        struct Path<C, S> {
            contributors: C,
            end_ns: u64,
            length_ns: u64,
            notes: Vec<String>,
            segments: S,
            start_ns: u64,
            step: Option<i64>,
            version: u32,
        }
        #[derive(Serialize)]
        struct SegmentJson<'a> {
            dur_ns: u64,
            rank: i64,
            span: &'a str,
            span_id: Hex,
            start_ns: u64,
            thread: usize,
        }
        #[derive(Serialize)]
        struct ContributorJson<'a> {
            if_free_ns: Option<u64>,
            on_path_ns: u64,
            rank: i64,
            span: &'a str,
            thread: usize,
        }
        Path {
            contributors: Seq(|| {
                self.contributors.iter().map(|c| ContributorJson {
                    if_free_ns: c.if_free_ns,
                    on_path_ns: c.on_path_ns,
                    rank: c.rank,
                    span: &c.span,
                    thread: c.thread,
                })
            }),
            end_ns: self.end_ns,
            length_ns: self.length_ns,
            notes: self.notes.clone(),
            segments: Seq(|| {
                self.segments.iter().map(|x| SegmentJson {
                    dur_ns: x.dur_ns,
                    rank: x.rank,
                    span: &x.span,
                    span_id: Hex(x.span_id),
                    start_ns: x.start_ns,
                    thread: x.thread,
                })
            }),
            start_ns: self.start_ns,
            step: self.step,
            version: JSON_VERSION,
        }
    }
}
