"""`load_session` against its floor in CPU instructions, counted by valgrind: a cross-check of
`bench_store.py` that noise from other jobs on the machine cannot move.

Each side runs in its own process under callgrind, once with no load and once with `LOADS`
loads of a 2,000-node session; the difference, per node, is what the loads cost. Hash
randomization is off, so a rerun gives the same counts. Instructions are not time (cache misses
and memory stalls do not show), so quote the timed benchmark for the goal and this to tell
whether a change helped.

    python benchmarks/bench_instructions.py      # needs valgrind; takes a few minutes
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_store import chain, raw_appends, raw_load

from memstore import SessionStore

NODES = 2_000
LOADS = 3


def child(side: str, loads: int) -> None:
    """Build both databases, then load one side `loads` times (run under callgrind)."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        nodes = chain("s", NODES)
        raw_appends(root / "raw.db", nodes)
        store = SessionStore(f"sqlite:///{root / 'store.db'}")
        for node in nodes:
            store.append_node("s", node)
        store.load_session("s")  # warm both paths: first-use costs are not per node
        raw_load(root / "raw.db")
        for _ in range(loads):
            if side == "floor":
                raw_load(root / "raw.db")
            else:
                store.load_session("s")
        store.close()


def instructions(side: str, loads: int) -> int:
    """The instructions a child process executes in all, as callgrind counts them."""
    result = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            side,
            str(loads),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"Collected : (\d+)", result.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{result.stderr}")
    return int(found.group(1))


def per_node(side: str) -> float:
    return (instructions(side, LOADS) - instructions(side, 0)) / (LOADS * NODES)


def main() -> int:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed; this benchmark counts instructions with it")
        return 1
    floor, ours = per_node("floor"), per_node("memstore")
    name = "load_session, instructions/node"
    print(f"{'':32} {'floor':>10} {'memstore':>10} {'ratio':>8}  goal")
    print(f"{name:32} {floor:10,.0f} {ours:10,.0f} {ours / floor:7.2f}x  <= 2x")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]))
        raise SystemExit(0)
    raise SystemExit(main())
