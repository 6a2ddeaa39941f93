//! What the analyses' self-contained HTML pages share: the base style, the script's helpers
//! (durations for a reader, SVG elements, table rows filled with `textContent`, never parsed as
//! HTML), and the report's JSON inlined where no name can close its `<script>`.

/// The style every page starts from; `@STYLE@` in a page.
const STYLE: &str = "body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
svg text { font: 12px monospace; }
table { border-collapse: collapse; font-family: monospace; }
td, th { padding: 2px 10px; text-align: right; border-bottom: 1px solid #eee; }
";

/// The script's helpers; `@HELPERS@` in a page.
const HELPERS: &str = r#"const NS = "http://www.w3.org/2000/svg";
function dur(ns) {
  const u = [[1e9, "s"], [1e6, "ms"], [1e3, "\u00b5s"]];
  for (const [f, n] of u) if (ns >= f) return (ns / f).toPrecision(3) + " " + n;
  return Math.round(ns) + " ns";
}
function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function addRow(body, cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement("td");
    td.textContent = String(c);
    tr.appendChild(td);
  }
  body.appendChild(tr);
}
"#;

/// `page` with its style and helpers in place.
pub(crate) fn fill(page: &str) -> String {
    page.replace("@STYLE@", STYLE).replace("@HELPERS@", HELPERS)
}

/// `json` as the text of a `<script type="application/json">`: `<` escaped, so that no name can
/// close the element.
pub(crate) fn data(json: &serde_json::Value) -> String {
    json.to_string().replace('<', "\\u003c")
}
