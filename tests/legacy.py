"""A minimal reader of legacy JSONL files for tests of the core (no store involved)."""

from __future__ import annotations

from pathlib import Path

from memstore import SessionGraph, jsjson


def read_legacy_session(path: Path) -> SessionGraph:
    """Replay a legacy session file as the original reader does."""
    nodes = []
    leaf = None
    for line in path.read_bytes().split(b"\n"):
        if not line:
            continue
        record = jsjson.loads(line)
        if record["type"] == "node":
            nodes.append(record["node"])
        elif record["type"] == "head":
            leaf = record["leaf"]
    return SessionGraph.hydrate(path.stem, nodes, leaf)
