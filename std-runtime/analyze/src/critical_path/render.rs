//! The critical path as text for a reader, and as JSON.

use std::fmt::Write;

use serde_json::{json, Value as Json};

use super::CriticalPath;
use crate::units::duration;

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
        let mut longest: Vec<_> = self.segments.iter().collect();
        longest.sort_by(|a, b| b.dur_ns.cmp(&a.dur_ns).then(a.start_ns.cmp(&b.start_ns)));
        for x in longest.into_iter().take(LISTED) {
            let at = x.start_ns.saturating_sub(self.start_ns);
            let _ = writeln!(s, "  +{}: rank {} {} for {}", duration(at), x.rank, x.span, duration(x.dur_ns));
        }
        s
    }

    /// The path as JSON (its shape in `docs/waits.md`).
    pub fn to_json(&self) -> Json {
        let segments: Vec<Json> = self
            .segments
            .iter()
            .map(|x| {
                json!({
                    "rank": x.rank, "thread": x.thread, "span": x.span,
                    "span_id": format!("{:016x}", x.span_id), "start_ns": x.start_ns, "dur_ns": x.dur_ns,
                })
            })
            .collect();
        let contributors: Vec<Json> = self
            .contributors
            .iter()
            .map(|c| {
                json!({
                    "rank": c.rank, "thread": c.thread, "span": c.span, "on_path_ns": c.on_path_ns,
                    "if_free_ns": c.if_free_ns,
                })
            })
            .collect();
        json!({
            "version": JSON_VERSION,
            "step": self.step,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "length_ns": self.length_ns,
            "segments": segments,
            "contributors": contributors,
            "notes": self.notes,
        })
    }
}
