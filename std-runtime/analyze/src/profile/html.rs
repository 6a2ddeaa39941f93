//! The profile as one self-contained HTML page: its JSON inlined, and an inline script that
//! draws a heat map of the communication matrix and a bar per rank (MPI and other time), and
//! the table of spans. Nothing is fetched, and every name from the trace is put in with
//! `textContent`, never parsed as HTML.

use super::Profile;
use crate::page;

/// The most rows of the span table.
const TABLE_ROWS: usize = 500;

impl Profile {
    /// The profile as a self-contained HTML page (inline CSS, script and SVG).
    pub fn to_html(&self) -> String {
        // Inside <script>, `<` is escaped so that no name can close the element.
        let data = page::data(&self.to_json());
        page::fill(PAGE).replace("@ROWS@", &TABLE_ROWS.to_string()).replace("@DATA@", &data)
    }
}

const PAGE: &str = r##"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>waffle profile</title>
<style>
@STYLE@rect.mpi { fill: #d9534f; } rect.other { fill: #9aa7b8; }
td:nth-child(2), th:nth-child(2) { text-align: left; }
</style>
</head>
<body>
<h1>waffle profile</h1>
<p id="summary"></p>
<h2>Time per rank (red: in MPI)</h2>
<svg id="ranks" xmlns="http://www.w3.org/2000/svg" width="900" height="40"></svg>
<h2>Messages (rows send, columns receive; colour: bytes)</h2>
<svg id="matrix" xmlns="http://www.w3.org/2000/svg" width="900" height="40"></svg>
<h2>Spans, per rank, the most time first</h2>
<table id="spans"><thead><tr><th>rank</th><th>span</th><th>count</th><th>total</th><th>self</th><th>% of rank</th></tr></thead><tbody></tbody></table>
<script type="application/json" id="data">@DATA@</script>
<script>
(function () {
"use strict";
const d = JSON.parse(document.getElementById("data").textContent);
@HELPERS@const msgs = d.messages.count.flat().reduce((a, b) => a + b, 0);
document.getElementById("summary").textContent =
  d.ranks.length + " ranks, " + d.rows.length + " span names, " + msgs + " messages" +
  (d.notes.length ? " \u2014 " + d.notes.join("; ") : "");
const bars = document.getElementById("ranks");
const wall = Math.max(1, ...d.ranks.map(r => r.wall_ns));
const left = 90, width = 600, row = 22;
bars.setAttribute("height", String(Math.max(40, d.ranks.length * row + 10)));
d.ranks.forEach((r, i) => {
  const g = el("g", { "class": "rank", "data-rank": String(r.rank), transform: "translate(0," + (i * row + 5) + ")" });
  g.appendChild(el("text", { x: left - 8, y: 13, "text-anchor": "end" }, "rank " + r.rank));
  const mpi = width * r.mpi_ns / wall, all = width * r.wall_ns / wall;
  g.appendChild(el("rect", { "class": "mpi", x: left, y: 2, height: 14, width: Math.max(0, mpi) }));
  g.appendChild(el("rect", { "class": "other", x: left + mpi, y: 2, height: 14, width: Math.max(0, all - mpi) }));
  g.appendChild(el("text", { "class": "value", x: left + width + 8, y: 13 },
    dur(r.mpi_ns) + " in MPI of " + dur(r.wall_ns)));
  bars.appendChild(g);
});
const m = d.messages, n = m.ranks.length, cell = Math.max(14, Math.min(48, Math.floor(600 / Math.max(1, n))));
const heat = document.getElementById("matrix");
heat.setAttribute("height", String(n * cell + 40));
heat.setAttribute("width", String(Math.max(300, n * cell + 80)));
const most = Math.max(1, ...m.bytes.flat());
m.ranks.forEach((r, i) => {
  heat.appendChild(el("text", { x: 44, y: 30 + i * cell + cell / 2 + 4, "text-anchor": "end" }, String(r)));
  heat.appendChild(el("text", { x: 50 + i * cell + cell / 2, y: 20, "text-anchor": "middle" }, String(r)));
  m.ranks.forEach((to, j) => {
    const b = m.bytes[i][j], c = m.count[i][j];
    const shade = b === 0 && c === 0 ? "rgb(244, 244, 244)" : "hsl(5, 70%, " + Math.round(92 - 55 * Math.sqrt(b / most)) + "%)";
    const rect = el("rect", { "class": "cell", "data-from": String(r), "data-to": String(to), "data-count": String(c),
      "data-bytes": String(b), x: 50 + j * cell, y: 26 + i * cell, width: cell - 1, height: cell - 1, fill: shade });
    rect.appendChild(el("title", {}, "rank " + r + " \u2192 " + to + ": " + c + " messages, " + b + " bytes"));
    heat.appendChild(rect);
  });
});
const body = document.querySelector("#spans tbody");
for (const r of d.rows.slice(0, @ROWS@)) {
  addRow(body, [r.rank, r.name, r.count, dur(r.total_ns), dur(r.self_ns), r.percent.toFixed(1)]);
}
})();
</script>
</body>
</html>
"##;
