//! The report as text for a reader, and as JSON.

use std::fmt::Write;

use serde_json::{json, Value as Json};

use super::Waits;
use crate::units::{duration, plural};

/// Version of the JSON's shape; it changes only when a field is renamed or removed.
pub const JSON_VERSION: u32 = 1;

/// How many root causes, call sites and waits the text lists.
const LISTED: usize = 10;

fn id(id: u64) -> String {
    format!("{id:016x}")
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

impl Waits {
    /// The report for a reader: the root causes first, then where the waiting was.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for note in &self.notes {
            let _ = writeln!(s, "note: {note}");
        }
        if self.waits.is_empty() {
            s += "no wait states: no rank waited for another\n";
            return s;
        }
        let total = self.total_wait_ns;
        let _ =
            writeln!(s, "{} in {}", duration(total), plural(self.waits.len(), "wait state", "wait states"));
        s += "\nroot causes (what the ranks waited for were busy with):\n";
        for (k, c) in self.root_causes.iter().take(LISTED).enumerate() {
            let how = if c.propagated_ns > 0 {
                format!(
                    " ({} directly, {} through other waits)",
                    duration(c.direct_ns),
                    duration(c.propagated_ns)
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "  {}. rank {} thread {}: {} took {} that made others wait {} ({:.1} %){how}",
                k + 1,
                c.rank,
                c.thread,
                c.span,
                duration(c.delay_ns),
                duration(c.caused_wait_ns),
                percent(c.caused_wait_ns, total),
            );
        }
        if self.root_causes.len() > LISTED {
            let _ = writeln!(s, "  ... {} more", self.root_causes.len() - LISTED);
        }
        s += "\nwaiting per rank:\n";
        for r in &self.per_rank {
            let _ = writeln!(
                s,
                "  rank {}: {} in {}",
                r.rank,
                duration(r.wait_ns),
                plural(r.waits, "wait", "waits")
            );
        }
        s += "\nwaiting per call site:\n";
        for t in self.per_site.iter().take(LISTED) {
            let _ = writeln!(
                s,
                "  rank {} {} ({}): {} in {}",
                t.rank,
                t.site,
                t.kind.name(),
                duration(t.wait_ns),
                plural(t.waits, "wait", "waits")
            );
        }
        s += "\nlongest waits:\n";
        let mut longest: Vec<_> = self.waits.iter().collect();
        longest.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.start_ns.cmp(&b.start_ns)));
        for w in longest.into_iter().take(LISTED) {
            let cause = w.root_cause.map_or(String::new(), |k| {
                let c = &self.root_causes[k];
                format!("; root cause: rank {} {}", c.rank, c.span)
            });
            let _ = writeln!(
                s,
                "  rank {} {} waited {} ({}) for rank {}'s {}{cause}",
                w.rank,
                w.site,
                duration(w.wait_ns),
                w.kind.name(),
                w.waited_for_rank,
                w.waited_for,
            );
        }
        s
    }

    /// The report as JSON (its shape in the crate's `waits` docs and `docs/waits.md`).
    pub fn to_json(&self) -> Json {
        let waits: Vec<Json> = self
            .waits
            .iter()
            .map(|w| {
                json!({
                    "rank": w.rank, "thread": w.thread, "call": &*w.call, "site": &*w.site,
                    "span_id": id(w.span_id), "kind": w.kind.name(), "start_ns": w.start_ns,
                    "wait_ns": w.wait_ns, "waited_for_rank": w.waited_for_rank,
                    "waited_for": &*w.waited_for, "root_cause": w.root_cause,
                })
            })
            .collect();
        let causes: Vec<Json> = self
            .root_causes
            .iter()
            .map(|c| {
                json!({
                    "rank": c.rank, "thread": c.thread, "span": c.span, "delay_ns": c.delay_ns,
                    "caused_wait_ns": c.caused_wait_ns, "direct_ns": c.direct_ns,
                    "propagated_ns": c.propagated_ns, "span_id": id(c.span_id), "start_ns": c.start_ns,
                })
            })
            .collect();
        let ranks: Vec<Json> = self
            .per_rank
            .iter()
            .map(|r| json!({ "rank": r.rank, "waits": r.waits, "wait_ns": r.wait_ns }))
            .collect();
        let sites: Vec<Json> = self
            .per_site
            .iter()
            .map(|t| {
                json!({ "rank": t.rank, "site": t.site, "kind": t.kind.name(), "waits": t.waits, "wait_ns": t.wait_ns })
            })
            .collect();
        json!({
            "version": JSON_VERSION,
            "total_wait_ns": self.total_wait_ns,
            "waits": waits,
            "root_causes": causes,
            "per_rank": ranks,
            "per_site": sites,
            "notes": self.notes,
        })
    }
}
