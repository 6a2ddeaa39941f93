"""The page `waffle-decode diff --html` writes, as a browser renders it.

The `diff_model` example is run twice, the second time with layer 2's weights perturbed and the
`gelu` kernel slowed; the page of their diff is loaded in headless Chromium, which runs its
inline script, and the DOM it prints afterwards (`--dump-dom`) is read back: the chart's bars
and labels (the slowed kernel first, its new bar longer than its base bar) and the divergence
text. The page as written holds no bars: whatever is checked here was drawn by its script.
Chromium is the Debian package `chromium` (scripts/test.sh installs it when missing).
Environment: `WAFFLE_BIN_DIR` (default `<repo>/target/debug`), `CHROMIUM` (default: `chromium`
on the PATH).
"""

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from waffle_bins import binary, run


def chromium():
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("chromium not found: install the Debian package `chromium` (scripts/test.sh does)")
    return path


class Rendered(HTMLParser):
    """The chart's kernels (name, bar widths, label, value text) and the divergence text."""

    def __init__(self):
        super().__init__()
        self.kernels = []
        self.texts = {}
        self._in = None  # what the text being read belongs to

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "g" and "kernel" in classes:
            self.kernels.append({"name": a["data-name"], "bars": {}, "label": "", "value": ""})
        elif tag == "rect" and "bar" in classes and self.kernels:
            side = "new" if "new" in classes else "base"
            self.kernels[-1]["bars"][side] = float(a["width"])
        elif tag == "text" and self.kernels and ("label" in classes or "value" in classes):
            self._in = ("kernel", "label" if "label" in classes else "value")
        elif tag == "p" and a.get("id") in ("divergence", "nonfinite"):
            self._in = ("p", a["id"])

    def handle_endtag(self, tag):
        if tag in ("text", "p"):
            self._in = None

    def handle_data(self, data):
        if self._in is None:
            return
        kind, key = self._in
        if kind == "kernel":
            self.kernels[-1][key] += data
        else:
            self.texts[key] = self.texts.get(key, "") + data


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    d = tmp_path_factory.mktemp("diff")
    example = binary("examples", "diff_model")
    run(example, d / "base.bin")
    run(example, d / "new.bin", "--perturb", "2", "--slow", "gelu")
    html = d / "diff.html"
    text = run(binary("waffle-decode"), "diff", d / "base.bin", d / "new.bin", "--html", html).stdout
    assert "first divergence: blk2/mlp at step 0" in text, text
    return html


def test_the_written_page_is_drawn_by_its_own_script(page):
    source = page.read_text()
    assert 'class="kernel"' not in source.split("<script")[0]
    assert not re.search(r'\b(src|href)=', source), "the page must fetch nothing"


def test_chromium_renders_the_chart_and_the_divergence(page):
    proc = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    dom = Rendered()
    dom.feed(proc.stdout)
    assert dom.kernels, proc.stdout
    top = dom.kernels[0]
    assert top["name"] == "gelu" and top["label"] == "gelu", dom.kernels
    assert top["bars"]["new"] > 2 * top["bars"]["base"], top
    assert re.fullmatch(r".+ → .+ \(\d+\.\d\dx\)", top["value"]), top
    # Every kernel of the model is drawn with both bars and its name.
    assert {k["name"] for k in dom.kernels} <= {"gelu", "matmul", "layernorm", "residual", "load"}
    assert all(set(k["bars"]) == {"base", "new"} and k["label"] == k["name"] for k in dom.kernels), dom.kernels
    divergence = dom.texts["divergence"]
    assert divergence.startswith("First divergence: blk2/mlp at step 0 — rms "), divergence
    assert "19 later tensors differ too" in divergence, divergence
    assert dom.texts["nonfinite"] == "First NaN/Inf in base: none; First NaN/Inf in new: none"
