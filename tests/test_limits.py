"""Big inputs: memory follows the largest record, not the file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from memstore import jsjson
from memstore.hashing import hash_node_text
from memstore.jsonl import head_line, node_line

from .conftest import LEGACY

# Peak memory from /proc (VmHWM): ru_maxrss would carry over the parent's peak across exec.
MEASURE = """
import sys
from memstore import SessionStore

def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024

store = SessionStore(sys.argv[1])
store.list_sessions()
before = peak_mb()
report = store.import_jsonl(sys.argv[2])
store.export_jsonl(report.files[0].session_id, sys.argv[3])
print(before, peak_mb(), report.records)
"""


def write_big_session(path: Path, megabytes: int) -> int:
    """A linear session made of the large fixture's turns, repeated under fresh ids."""
    turns = [
        jsjson.dumps(jsjson.loads(line)["node"]["turn"])
        for line in (LEGACY / "large-session.jsonl").read_text().split("\n")
        if line.startswith('{"type":"node"')
    ]
    parent: str | None = None
    written = records = 0
    with path.open("w", encoding="utf-8", newline="") as out:
        while written < megabytes * 1_000_000:
            turn_json = turns[records % len(turns)]
            created_at = 1_767_225_600_000 + records
            node_id = hash_node_text(parent, turn_json.encode(), created_at)
            text = node_line(node_id, parent, turn_json, created_at) + head_line(node_id)
            written += out.write(text)
            parent = node_id
            records += 1
    return records * 2


def test_importing_and_exporting_a_big_file_keeps_memory_bounded(tmp_path: Path) -> None:
    source = tmp_path / "big.jsonl"
    records = write_big_session(source, 80)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            MEASURE,
            f"sqlite:///{tmp_path / 'db.sqlite'}",
            str(source),
            str(tmp_path / "out.jsonl"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    before, after, imported = map(int, done.stdout.split())
    assert imported == records
    assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()
    # 80 MB went through; the process grew by a small fraction of that.
    assert after - before < 40, json.dumps({"before_mb": before, "after_mb": after})
