//! The diff as one self-contained HTML page: the report's JSON inlined, and an inline script
//! that draws it (an SVG chart of the largest kernel time changes, the first divergence, the
//! first NaN or Inf of each run, and the table of kernels). No file or network is fetched,
//! so the page opens anywhere, and every name from the trace is put in with `textContent`,
//! never parsed as HTML.

use super::Diff;
use crate::page;

/// The most kernels the chart shows (the largest changes of total time, either way).
pub(crate) const CHART_KERNELS: usize = 12;

/// The most rows of the kernel table.
const TABLE_ROWS: usize = 500;

impl Diff {
    /// The report as a self-contained HTML page (inline CSS, script and SVG).
    pub fn to_html(&self) -> String {
        // Inside <script>, `<` is escaped so that no name can close the element.
        let data = page::data(&self.to_json());
        page::fill(PAGE)
            .replace("@CHART@", &CHART_KERNELS.to_string())
            .replace("@ROWS@", &TABLE_ROWS.to_string())
            .replace("@DATA@", &data)
    }
}

const PAGE: &str = r##"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>waffle diff</title>
<style>
@STYLE@.runs { color: #555; font-family: monospace; }
#divergence { padding: .6em 1em; border-left: 4px solid #c33; background: #fdf2f2; }
#divergence.none { border-color: #3a3; background: #f2fbf2; }
rect.base { fill: #9aa7b8; } rect.new.slower { fill: #d9534f; } rect.new.faster { fill: #3c9a5f; }
td:first-child, th:first-child, td:last-child { text-align: left; }
</style>
</head>
<body>
<h1>waffle diff</h1>
<p class="runs" id="runs"></p>
<h2>Tensors</h2>
<p id="divergence"></p>
<p id="nonfinite"></p>
<h2>Largest kernel time changes</h2>
<svg id="chart" xmlns="http://www.w3.org/2000/svg" width="900" height="40"></svg>
<h2>Kernels, slowest regressions first</h2>
<table id="kernels"><thead><tr><th>kernel</th><th>base n</th><th>base time</th><th>new n</th><th>new time</th><th>ratio</th><th>status</th></tr></thead><tbody></tbody></table>
<script type="application/json" id="data">@DATA@</script>
<script>
(function () {
"use strict";
const d = JSON.parse(document.getElementById("data").textContent);
@HELPERS@function ratio(r) { return r === null ? "-" : r.toFixed(2) + "x"; }
function at(t) {
  return t.name + (t.step === null ? " (in no step)" : " at step " + t.step) +
    (t.occurrence > 0 ? ", occurrence " + t.occurrence : "") + (t.rank > 0 ? ", rank " + t.rank : "");
}
function rms(v) { return v === null ? "n/a" : v.toPrecision(6); }
document.getElementById("runs").textContent =
  "base: " + d.base.files.join(" ") + " (" + d.base.spans + " spans, " + d.base.tensors + " tensors)  \u2014  new: " +
  d.new.files.join(" ") + " (" + d.new.spans + " spans, " + d.new.tensors + " tensors)";
const div = document.getElementById("divergence");
const f = d.first_divergence;
if (f) {
  div.textContent = "First divergence: " + at(f) + " \u2014 rms " + rms(f.base_rms) + " \u2192 " + rms(f.new_rms) +
    "; " + f.later_differing + " later tensors differ too (" + d.tensors.differ + " of " + d.tensors.compared + " compared).";
} else {
  div.className = "none";
  div.textContent = d.tensors.compared > 0 ? "No divergence: all " + d.tensors.compared + " aligned tensors are equal." : "No tensors to compare.";
}
const nf = d.first_nonfinite;
document.getElementById("nonfinite").textContent = ["base", "new"].map(s => "First NaN/Inf in " + s + ": " +
  (nf[s] ? at(nf[s]) + " (" + nf[s].nan + " NaN, " + nf[s].pinf + " +Inf, " + nf[s].ninf + " -Inf)" : "none")).join("; ");
const svg = document.getElementById("chart");
const changed = d.kernels.filter(k => k.change_ns !== 0)
  .sort((a, b) => Math.abs(b.change_ns) - Math.abs(a.change_ns)).slice(0, @CHART@);
const max = Math.max(1, ...changed.map(k => Math.max(k.base_ns, k.new_ns)));
const left = 260, width = 420, row = 34;
svg.setAttribute("height", String(Math.max(40, changed.length * row + 10)));
changed.forEach((k, i) => {
  const g = el("g", { "class": "kernel", "data-name": k.name, transform: "translate(0," + (i * row + 5) + ")" });
  g.appendChild(el("text", { "class": "label", x: left - 8, y: 19, "text-anchor": "end" }, k.name));
  g.appendChild(el("rect", { "class": "bar base", x: left, y: 2, height: 11, width: Math.max(1, width * k.base_ns / max) }));
  g.appendChild(el("rect", { "class": "bar new " + (k.change_ns > 0 ? "slower" : "faster"), x: left, y: 15, height: 11,
    width: Math.max(1, width * k.new_ns / max) }));
  g.appendChild(el("text", { "class": "value", x: left + width + 8, y: 19 },
    dur(k.base_ns) + " \u2192 " + dur(k.new_ns) + " (" + ratio(k.ratio) + ")"));
  svg.appendChild(g);
});
if (changed.length === 0) svg.appendChild(el("text", { x: 10, y: 25 }, "No kernel changed its total time."));
const body = document.querySelector("#kernels tbody");
for (const k of d.kernels.slice(0, @ROWS@)) {
  const status = k.status.replace(/_/g, " ") + (k.partners.length ? " (" + k.partners.join(", ") + ")" : "");
  addRow(body, [k.name, k.base_count, dur(k.base_ns), k.new_count, dur(k.new_ns), ratio(k.ratio), status]);
}
})();
</script>
</body>
</html>
"##;
