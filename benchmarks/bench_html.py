"""The HTML page of a 3,000-turn session in headless Chromium: time to the first painted frame
(opened at the head), a branch switch and a find, against a floor.

The floor is the same session's text as one `<pre>` (no markup, no script): the least a browser
does to show that much text. Also measured: the page with every turn laid out at once (no
`content-visibility`), as it was before.

    python benchmarks/bench_html.py [--runs 3]
"""

from __future__ import annotations

import argparse
import html
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memstore.jsonl import JsonlSessionStore
from memstore.render import render_html
from tests.chromium import Browser

LEGACY = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "legacy-jsonl"
PAINTED = (
    "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() =>"
    " r(performance.now()))))"
)
SWITCH = (
    "(async () => { const t = performance.now();"
    " document.querySelector('.side .tips a:not(.current)').click();"
    f" return (await {PAINTED}) - t; }})()"
)
FIND = (
    "(async () => { const box = document.getElementById('find'); box.value = 'error';"
    " const t = performance.now();"
    " box.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}));"
    f" return (await {PAINTED}) - t; }})()"
)
NO_LAZY = ".turn { content-visibility: auto; contain-intrinsic-size: auto 180px; }"


def measure(path: Path, actions: bool) -> dict[str, float]:
    with Browser() as browser:
        browser.open(path)
        timings = {"painted": float(browser.js(PAINTED))}
        if actions:
            timings["switch"] = float(browser.js(SWITCH))
            timings["find"] = float(browser.js(FIND))
        assert browser.problems() == [], browser.problems()
    return timings


def median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    graph = JsonlSessionStore(LEGACY).load_session("large-session")
    page = render_html(graph)
    texts = "\n\n".join(node.turn.json_text() for node in graph.all())
    with tempfile.TemporaryDirectory() as scratch:
        files = {
            "page": Path(scratch, "page.html"),
            "all laid out": Path(scratch, "eager.html"),
            "floor": Path(scratch, "floor.html"),
        }
        files["page"].write_text(page, encoding="utf-8")
        assert NO_LAZY in page
        files["all laid out"].write_text(page.replace(NO_LAZY, ""), encoding="utf-8")
        floor = f"<!DOCTYPE html><meta charset=utf-8><pre>{html.escape(texts)}</pre>"
        files["floor"].write_text(floor, encoding="utf-8")
        runs = {name: [measure(path, name != "floor") for _ in range(options.runs)]
                for name, path in files.items()}  # fmt: skip
    base = median(runs["floor"], "painted")
    print(f"{graph.size} turns, page {len(page.encode()):,} bytes, floor {len(floor):,} bytes")
    for name in ("floor", "page", "all laid out"):
        painted = median(runs[name], "painted")
        line = f"{name:>13}: first frame {painted:7.0f} ms ({painted / base:4.1f}x the floor)"
        if name != "floor":
            line += (
                f", branch switch {median(runs[name], 'switch'):5.0f} ms,"
                f" find {median(runs[name], 'find'):5.0f} ms"
            )
        print(line)


if __name__ == "__main__":
    main()
