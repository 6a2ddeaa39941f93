//! The diff as text and as JSON (its shape is in the [module docs](super)).

use super::{Diff, KernelRow, NonFinite, RunInfo, TensorAt};
use serde_json::{json, Value as Json};
use std::fmt::Write;

/// The version of the JSON shape.
pub const JSON_VERSION: u32 = 1;

impl Diff {
    /// The report as `waffle-decode diff` prints it: the runs, the tensors (first divergence,
    /// first NaN or Inf of each run), then a table of kernels, slowest regressions first
    /// (at most `limit` rows, all with `None`). The warnings are not in it: the command line
    /// prints them on stderr.
    pub fn to_text(&self, limit: Option<usize>) -> String {
        let mut out = String::new();
        let run = |r: &RunInfo| {
            let mut steps = format!(
                "{} steps, {} in steps, {} in kernels",
                r.steps,
                duration(r.step_ns as f64),
                duration(r.kernel_ns as f64)
            );
            if r.late > 0 {
                let _ = write!(steps, ", {} kernels too late for their step to be aligned", r.late);
            }
            format!("{} ({} spans, {} tensors, {steps})", r.files.join(" "), r.spans, r.tensors)
        };
        let _ = writeln!(out, "base: {}", run(&self.base));
        let _ = writeln!(out, "new:  {}", run(&self.new));
        let ranks = self.base.files.len().max(self.new.files.len()) > 1;
        let t = &self.tensors;
        let _ = writeln!(out, "\ntensors: {} compared, {} differ", t.compared, t.differ);
        if t.only_base + t.only_new > 0 {
            let _ = writeln!(out, "  {} only in base, {} only in new", t.only_base, t.only_new);
        }
        match &t.first_divergence {
            Some(d) => {
                let _ = writeln!(out, "first divergence: {}", tensor_at(&d.at, ranks));
                let _ = writeln!(
                    out,
                    "  rms {} -> {}, hash {:016x} -> {:016x}; {} later tensors differ too",
                    rms(d.base_rms),
                    rms(d.new_rms),
                    d.base_hash,
                    d.new_hash,
                    d.later
                );
            }
            None if t.compared > 0 => {
                let _ = writeln!(out, "first divergence: none, every aligned tensor is equal");
            }
            None => {}
        }
        for (side, nf) in ["base", "new"].iter().zip(&t.first_nonfinite) {
            let what = nf.as_ref().map_or("none".to_owned(), |nf| nonfinite(nf, ranks));
            let _ = writeln!(out, "first NaN/Inf in {side}: {what}");
        }
        let shown = limit.unwrap_or(usize::MAX).min(self.kernels.len());
        let _ = writeln!(out, "\nkernels, slowest regressions first ({shown} of {}):", self.kernels.len());
        let width = self.kernels[..shown].iter().map(|k| k.name.chars().count()).max().unwrap_or(4).max(6);
        let _ = writeln!(
            out,
            "  {:width$}  {:>7} {:>10} {:>10}  {:>7} {:>10} {:>10}  {:>8}  status",
            "kernel", "base n", "base time", "base mean", "new n", "new time", "new mean", "ratio"
        );
        for k in &self.kernels[..shown] {
            let _ = writeln!(
                out,
                "  {:width$}  {:>7} {:>10} {:>10}  {:>7} {:>10} {:>10}  {:>8}  {}",
                k.name,
                k.base_count,
                duration(k.base_ns as f64),
                duration(k.base_mean_ns()),
                k.new_count,
                duration(k.new_ns as f64),
                duration(k.new_mean_ns()),
                k.ratio().map_or("-".to_owned(), |r| format!("{r:.2}x")),
                status(k)
            );
        }
        out
    }

    /// The report as JSON (the [module docs](super) give its shape).
    pub fn to_json(&self) -> Json {
        let run = |r: &RunInfo| json!({"files": r.files, "spans": r.spans, "tensors": r.tensors, "steps": r.steps, "step_ns": r.step_ns, "kernel_ns": r.kernel_ns, "late": r.late});
        let t = &self.tensors;
        let divergence = t.first_divergence.as_ref().map(|d| {
            let mut v = at_json(&d.at);
            v["base_hash"] = json!(format!("{:016x}", d.base_hash));
            v["new_hash"] = json!(format!("{:016x}", d.new_hash));
            v["base_rms"] = finite(d.base_rms);
            v["new_rms"] = finite(d.new_rms);
            v["later_differing"] = json!(d.later);
            v
        });
        let nonfinite = |nf: &Option<NonFinite>| {
            nf.as_ref().map(|nf| {
                let mut v = at_json(&nf.at);
                v["nan"] = json!(nf.nan);
                v["pinf"] = json!(nf.pinf);
                v["ninf"] = json!(nf.ninf);
                v
            })
        };
        let kernels: Vec<Json> = self.kernels.iter().map(kernel_json).collect();
        json!({
            "version": JSON_VERSION,
            "base": run(&self.base),
            "new": run(&self.new),
            "first_divergence": divergence,
            "first_nonfinite": {"base": nonfinite(&t.first_nonfinite[0]), "new": nonfinite(&t.first_nonfinite[1])},
            "tensors": {"base": t.base, "new": t.new, "compared": t.compared, "differ": t.differ,
                        "only_base": t.only_base, "only_new": t.only_new},
            "kernels": kernels,
        })
    }
}

fn kernel_json(k: &KernelRow) -> Json {
    json!({
        "name": k.name,
        "status": k.status.name(),
        "partners": k.status.partners(),
        "base_count": k.base_count,
        "new_count": k.new_count,
        "base_ns": k.base_ns,
        "new_ns": k.new_ns,
        "base_mean_ns": k.base_mean_ns(),
        "new_mean_ns": k.new_mean_ns(),
        "ratio": k.ratio().map_or(Json::Null, finite),
        "change_ns": i64::try_from(k.change_ns()).unwrap_or(if k.change_ns() > 0 { i64::MAX } else { i64::MIN }),
        "matched": k.matched,
        "only_base": k.only_base,
        "only_new": k.only_new,
        "steps": k.steps,
    })
}

fn at_json(at: &TensorAt) -> Json {
    json!({"name": at.name, "step": at.step, "rank": at.rank, "occurrence": at.occurrence})
}

fn finite(v: f64) -> Json {
    if v.is_finite() {
        json!(v)
    } else {
        Json::Null
    }
}

/// `blk2/attn at step 0` (with the rank when there are several, the occurrence when not the
/// first).
pub(super) fn tensor_at(at: &TensorAt, ranks: bool) -> String {
    let mut s = at.name.clone();
    match at.step {
        Some(step) => {
            let _ = write!(s, " at step {step}");
        }
        None => s.push_str(" (in no step)"),
    }
    if at.occurrence > 0 {
        let _ = write!(s, ", occurrence {}", at.occurrence);
    }
    if ranks {
        let _ = write!(s, ", rank {}", at.rank);
    }
    s
}

fn nonfinite(nf: &NonFinite, ranks: bool) -> String {
    format!("{}: {} NaN, {} +Inf, {} -Inf", tensor_at(&nf.at, ranks), nf.nan, nf.pinf, nf.ninf)
}

fn rms(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else {
        format!("{v:.6}")
    }
}

fn status(k: &KernelRow) -> String {
    let partners = k.status.partners();
    let mut s = k.status.name().replace('_', " ");
    if !partners.is_empty() {
        let _ = write!(s, " ({})", partners.join(", "));
    }
    if k.only_base + k.only_new > 0 && k.matched > 0 {
        let _ = write!(s, "; {} only in base, {} only in new", k.only_base, k.only_new);
    }
    s
}

/// `812 ns`, `3.20 µs`, `16.0 ms`, `2.50 s`.
pub(super) fn duration(ns: f64) -> String {
    let (v, unit) = match ns {
        n if n < 1e3 => return format!("{n:.0} ns"),
        n if n < 1e6 => (n / 1e3, "µs"),
        n if n < 1e9 => (n / 1e6, "ms"),
        n => (n / 1e9, "s"),
    };
    if v < 10.0 {
        format!("{v:.2} {unit}")
    } else if v < 100.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.0} {unit}")
    }
}
