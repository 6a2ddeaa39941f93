//! The report as text for a reader, and as JSON.

use std::fmt::Write;

use serde::Serialize;
use serde_json::Value as Json;

use super::Waits;
use crate::{
    json_out::{self, Hex, Seq},
    units::{duration, first_by, plural},
};

/// Version of the JSON's shape; it changes only when a field is renamed or removed.
pub const JSON_VERSION: u32 = 1;

/// How many root causes, call sites and waits the text lists.
const LISTED: usize = 10;

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
        let longest =
            first_by(&self.waits, LISTED, |a, b| b.wait_ns.cmp(&a.wait_ns).then(a.start_ns.cmp(&b.start_ns)));
        for w in longest {
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
        json_out::value(&self.json_shape())
    }

    /// [`to_json`](Self::to_json) written to `out` as pretty JSON while it is made, with a
    /// newline: no JSON tree is held, however many waits there are.
    pub fn write_json(&self, out: impl std::io::Write) -> std::io::Result<()> {
        json_out::write_pretty(out, &self.json_shape())
    }

    fn json_shape(&self) -> impl Serialize + '_ {
        #[derive(Serialize)]
        struct Report<W, C, R, S> {
            notes: Vec<String>,
            per_rank: R,
            per_site: S,
            root_causes: C,
            total_wait_ns: u64,
            version: u32,
            waits: W,
        }
        #[derive(Serialize)]
        struct WaitJson<'a> {
            call: &'a str,
            kind: &'static str,
            rank: i64,
            root_cause: Option<usize>,
            site: &'a str,
            span_id: Hex,
            start_ns: u64,
            thread: usize,
            wait_ns: u64,
            waited_for: &'a str,
            waited_for_rank: i64,
        }
        #[derive(Serialize)]
        struct CauseJson<'a> {
            caused_wait_ns: u64,
            delay_ns: u64,
            direct_ns: u64,
            propagated_ns: u64,
            rank: i64,
            span: &'a str,
            span_id: Hex,
            start_ns: u64,
            thread: usize,
        }
        #[derive(Serialize)]
        struct RankJson {
            rank: i64,
            wait_ns: u64,
            waits: usize,
        }
        #[derive(Serialize)]
        struct SiteJson<'a> {
            kind: &'static str,
            rank: i64,
            site: &'a str,
            wait_ns: u64,
            waits: usize,
        }
        Report {
            notes: self.notes.clone(),
            per_rank: Seq(|| {
                self.per_rank.iter().map(|r| RankJson { rank: r.rank, wait_ns: r.wait_ns, waits: r.waits })
            }),
            per_site: Seq(|| {
                self.per_site.iter().map(|t| SiteJson {
                    kind: t.kind.name(),
                    rank: t.rank,
                    site: &t.site,
                    wait_ns: t.wait_ns,
                    waits: t.waits,
                })
            }),
            root_causes: Seq(|| {
                self.root_causes.iter().map(|c| CauseJson {
                    caused_wait_ns: c.caused_wait_ns,
                    delay_ns: c.delay_ns,
                    direct_ns: c.direct_ns,
                    propagated_ns: c.propagated_ns,
                    rank: c.rank,
                    span: &c.span,
                    span_id: Hex(c.span_id),
                    start_ns: c.start_ns,
                    thread: c.thread,
                })
            }),
            total_wait_ns: self.total_wait_ns,
            version: JSON_VERSION,
            waits: Seq(|| {
                self.waits.iter().map(|w| WaitJson {
                    call: &w.call,
                    kind: w.kind.name(),
                    rank: w.rank,
                    root_cause: w.root_cause,
                    site: &w.site,
                    span_id: Hex(w.span_id),
                    start_ns: w.start_ns,
                    thread: w.thread,
                    wait_ns: w.wait_ns,
                    waited_for: &w.waited_for,
                    waited_for_rank: w.waited_for_rank,
                })
            }),
        }
    }
}
