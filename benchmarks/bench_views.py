"""The views of one long linear session (40,000 turns by default), each against a floor run in
the same process on the same session:

- `export --format html`: `render_html` plus the file's write, against the session's legacy
  JSONL file (its size, and the time to write its bytes). Goals: at most 1.5x the JSONL's size,
  under 5 s. With `--browser` (needs `chromium`), the page's first painted frame in headless
  Chromium, opened at the head, against the same text as one `<pre>`.
- `tree`: the drawing (`render_tree` printed to a terminal of 100 columns), beside the
  `load_session` it needs. Goal: the whole command under a second.
- `sql`: a 20,000-row answer drawn as a table, against the same query with `--json` (both
  through the command line, in a new process each). Goal: at most 1.5x the `--json` time.

The turns are of the peer workload's three shapes: a user's text, an assistant's text and a
tool call, a tool's result of about 2 KB.

    python benchmarks/bench_views.py [--turns 40000] [--rows 20000] [--rounds 3] [--browser]
"""

from __future__ import annotations

import argparse
import html
import io
import itertools
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console

from memstore import SessionGraph, SessionStore
from memstore.jsonl import JsonlSessionStore
from memstore.render import render_html
from memstore.terminal import render_tree

# fmt: off
WORDS = (
    "the", "agent", "tool", "call", "result", "file", "line", "error", "test", "build", "module",
    "function", "value", "config", "session", "store", "turn", "message", "node", "parent",
    "leaf", "graph", "path", "sqlite", "table", "index", "query", "commit", "write", "read",
)
# fmt: on
TOOLS = ("read_file", "write_file", "run_shell", "search_code", "list_dir", "apply_patch")
PAINTED = (
    "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() =>"
    " r(performance.now()))))"
)


def words(rng: random.Random, low: int, high: int) -> str:
    size = rng.randint(low, high)
    picked: list[str] = []
    while sum(len(word) + 1 for word in picked) < size:
        picked.append(rng.choice(WORDS))
    return " ".join(picked)[:size]


def turns(count: int) -> list[dict[str, Any]]:
    """The workload: a user's text, an assistant's text and call, the call's result, again."""
    rng = random.Random(33)
    made: list[dict[str, Any]] = []
    for number in range(count):
        call = f"call_{number // 3:06d}"
        if number % 3 == 0:
            prose = {"kind": "text", "text": words(rng, 300, 800)}
            made.append({"role": "user", "blocks": [prose]})
        elif number % 3 == 1:
            made.append({"role": "assistant", "blocks": [
                {"kind": "text", "text": words(rng, 300, 800)},
                {"kind": "tool_call", "id": call, "name": rng.choice(TOOLS),
                 "input": {"path": f"src/{rng.choice(WORDS)}.py", "query": words(rng, 20, 60)}},
            ]})  # fmt: skip
        else:
            made.append({"role": "user", "blocks": [
                {"kind": "tool_result", "callId": call, "output": words(rng, 1900, 2200)},
            ]})  # fmt: skip
    return made


def best(rounds: int, run: Callable[[], object]) -> float:
    """The best of `rounds` timings of `run`, in seconds."""
    return min(timed(run)[0] for _ in range(rounds))


def timed(run: Callable[[], object]) -> tuple[float, float]:
    """Seconds `run` takes: on the clock, and of CPU (this process's and its children's), which
    other work on a shared machine moves less."""
    started, cpu = time.perf_counter(), _cpu()
    run()
    return time.perf_counter() - started, _cpu() - cpu


def _cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def bench_html(graph: SessionGraph, jsonl: Path, scratch: Path, options: Any) -> None:
    data = jsonl.read_bytes()
    page_file = scratch / "page.html"
    floor_file = scratch / "floor.jsonl"
    floor = best(options.rounds, lambda: floor_file.write_bytes(data))
    page, cpu = min(
        timed(lambda: page_file.write_text(render_html(graph), encoding="utf-8"))
        for _ in range(options.rounds)
    )
    size = page_file.stat().st_size
    print(
        f"html: page {size:,} bytes, {size / len(data):.2f}x the JSONL's {len(data):,};"
        f" written in {page:.2f} s, {cpu:.2f} s of CPU (goal: 5 s;"
        f" the JSONL's raw write {floor:.3f} s)",
        flush=True,
    )
    if options.browser:
        bench_browser(graph, page_file, scratch)


def bench_browser(graph: SessionGraph, page_file: Path, scratch: Path) -> None:
    from tests import chromium
    from tests.chromium import Browser

    chromium.TIMEOUT = 600.0  # a page of 70 MB takes its time on a busy machine

    pre = scratch / "floor.html"
    texts = "\n\n".join(node.turn.json_text() for node in graph.all())
    pre.write_text(f"<!DOCTYPE html><meta charset=utf-8><pre>{html.escape(texts)}</pre>")
    painted = {}
    for name, path in (("floor", pre), ("page", page_file)):
        with Browser() as browser:
            started = time.perf_counter()
            browser.open(path)
            browser.js(PAINTED)
            painted[name] = time.perf_counter() - started
            if name == "page":
                assert browser.problems() == [], browser.problems()
                at_head = browser.js(
                    "(() => { const r = document.querySelector('article.head')"
                    ".getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; })()"
                )
                assert at_head is True, "the page did not open at the head"
    print(
        f"html in Chromium: opened at the head, first frame {painted['page']:.1f} s;"
        f" the same text as one <pre> {painted['floor']:.1f} s"
        f" ({painted['page'] / painted['floor']:.1f}x)",
        flush=True,
    )


def bench_tree(store: SessionStore, session: str, options: Any) -> None:
    graph = store.load_session(session)
    load, load_cpu = min(timed(lambda: store.load_session(session)) for _ in range(options.rounds))

    def draw() -> str:
        console = Console(file=io.StringIO(), width=100, color_system=None)
        console.print(render_tree(graph))
        return console.file.getvalue()  # type: ignore[attr-defined, no-any-return]

    drawing, drawing_cpu = min(timed(draw) for _ in range(options.rounds))
    lines = draw().count("\n")
    unfolded = best(1, lambda: Console(file=io.StringIO(), width=100).print(
        render_tree(graph, fold=False)))  # fmt: skip
    print(
        f"tree: {lines} lines drawn in {drawing:.3f} s + load_session {load:.2f} s"
        f" = {drawing + load:.2f} s ({drawing_cpu + load_cpu:.2f} s of CPU; goal: 1 s);"
        f" every turn unfolded: {unfolded:.1f} s",
        flush=True,
    )


def bench_sql(url: str, options: Any) -> None:
    query = f"SELECT node_id, role, created_at FROM turns LIMIT {options.rows}"
    base = [sys.executable, "-m", "memstore", "--db", url, "sql", query, "--limit", "100000"]

    def run(*extra: str) -> Callable[[], object]:
        return lambda: subprocess.run(
            [*base, *extra], check=True, capture_output=True, env={**os.environ, "COLUMNS": "100"}
        )

    as_json = min(timed(run("--json")) for _ in range(options.rounds))
    table = min(timed(run()) for _ in range(options.rounds))
    print(
        f"sql: {options.rows:,} rows as a table {table[0]:.2f} s ({table[1]:.2f} s of CPU),"
        f" with --json {as_json[0]:.2f} s ({as_json[1]:.2f} s of CPU):"
        f" {table[0] / as_json[0]:.2f}x, of CPU {table[1] / as_json[1]:.2f}x (goal: 1.5x)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=40_000)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--browser", action="store_true", help="also open the page in Chromium")
    options = parser.parse_args()
    clock = itertools.count(1_780_000_000_000, 1000).__next__
    graph = SessionGraph("long", clock=clock)
    for turn in turns(options.turns):
        graph.append(turn)
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        files = JsonlSessionStore(scratch / "jsonl")
        for node in graph.all():
            files.append_node("long", node)
        jsonl = scratch / "jsonl" / "long.jsonl"
        print(
            f"{options.turns:,} turns, one chain; JSONL {jsonl.stat().st_size:,} bytes", flush=True
        )
        bench_html(graph, jsonl, scratch, options)
        url = f"sqlite:///{scratch / 'views.db'}"
        with SessionStore(url) as store:
            store.import_jsonl(jsonl)
            bench_tree(store, "long", options)
        bench_sql(url, options)


if __name__ == "__main__":
    main()
