//! The profile as text for a reader, and as JSON.

use std::fmt::Write;

use serde_json::{json, Value as Json};

use super::Profile;
use crate::units::duration;

/// Version of the JSON's shape; it changes only when a field is renamed or removed.
pub const JSON_VERSION: u32 = 1;

/// How many span names the text lists per rank.
const LISTED: usize = 12;

impl Profile {
    /// The profile for a reader: each rank's time and its spans, then the messages.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for note in &self.notes {
            let _ = writeln!(s, "note: {note}");
        }
        for r in &self.ranks {
            let share = if r.wall_ns == 0 { 0.0 } else { 100.0 * r.mpi_ns as f64 / r.wall_ns as f64 };
            let _ = writeln!(
                s,
                "rank {}: {} wall, {} in MPI ({share:.1} %), {} thread(s)",
                r.rank,
                duration(r.wall_ns),
                duration(r.mpi_ns),
                r.threads
            );
            let rows = self.rows.iter().filter(|x| x.rank == r.rank);
            let _ = writeln!(s, "  {:<32} {:>9} {:>13} {:>13} {:>7}", "span", "count", "total", "self", "%");
            for row in rows.take(LISTED) {
                let _ = writeln!(
                    s,
                    "  {:<32} {:>9} {:>13} {:>13} {:>6.1}%",
                    row.name,
                    row.count,
                    duration(row.total_ns),
                    duration(row.self_ns),
                    row.percent
                );
            }
        }
        let m = &self.matrix;
        let total: u64 = m.count.iter().flatten().sum();
        if total == 0 {
            s += "\nno messages between ranks\n";
            return s;
        }
        let _ = writeln!(s, "\nmessages (rows send, columns receive): count / bytes");
        let _ = write!(s, "  {:>8}", "");
        for r in &m.ranks {
            let _ = write!(s, " {:>18}", format!("to {r}"));
        }
        s.push('\n');
        for (i, r) in m.ranks.iter().enumerate() {
            let _ = write!(s, "  {:>8}", format!("from {r}"));
            for j in 0..m.ranks.len() {
                let _ = write!(s, " {:>18}", format!("{} / {}", m.count[i][j], m.bytes[i][j]));
            }
            s.push('\n');
        }
        s
    }

    /// The profile as JSON (its shape in `docs/waits.md`).
    pub fn to_json(&self) -> Json {
        let rows: Vec<Json> = self
            .rows
            .iter()
            .map(|r| {
                json!({
                    "rank": r.rank, "name": r.name, "count": r.count, "total_ns": r.total_ns,
                    "self_ns": r.self_ns, "percent": r.percent,
                })
            })
            .collect();
        let ranks: Vec<Json> = self
            .ranks
            .iter()
            .map(
                |r| json!({ "rank": r.rank, "wall_ns": r.wall_ns, "mpi_ns": r.mpi_ns, "threads": r.threads }),
            )
            .collect();
        json!({
            "version": JSON_VERSION,
            "rows": rows,
            "ranks": ranks,
            "messages": { "ranks": self.matrix.ranks, "count": self.matrix.count, "bytes": self.matrix.bytes },
            "notes": self.notes,
        })
    }
}
