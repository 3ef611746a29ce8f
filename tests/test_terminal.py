"""How the command line draws sessions: a continuation and a branch never look alike."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rich.console import Console

from memstore import SessionGraph, SessionStore
from memstore.terminal import data_table, render_tree

from .conftest import LEGACY


def drawn(graph: SessionGraph, width: int = 100) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    console.print(render_tree(graph))
    return console.export_text().splitlines()


def say(text: str) -> dict[str, object]:
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


def line_of(lines: list[str], text: str) -> str:
    (line,) = [line for line in lines if text in line]
    return line


def test_a_chain_is_one_entry_and_each_branch_gets_a_connector() -> None:
    ticks = iter(range(1, 100))
    graph = SessionGraph("s", clock=lambda: next(ticks))
    graph.append(say("first"))
    fork = graph.append(say("second"))
    graph.append(say("third"))
    graph.append(say("fourth"))
    graph.branch_from(fork.id)
    graph.append(say("other"))
    lines = drawn(graph)
    assert lines[0] == "s"
    assert line_of(lines, "first").startswith("└── ")
    assert line_of(lines, "second").startswith("    ")
    assert "──" not in line_of(lines, "second")
    assert "├── " in line_of(lines, "third")
    assert "──" not in line_of(lines, "fourth")  # continues "third"
    assert "└── " in line_of(lines, "other")
    assert "◀ head" in line_of(lines, "other")


def test_a_narrow_terminal_cuts_the_preview_never_the_head_marker() -> None:
    graph = SessionGraph("s")
    graph.append(say("a long request " * 20))
    lines = drawn(graph, width=40)
    assert len(lines) == 2
    assert "◀ head" in lines[1]
    assert lines[1].endswith("…")


def test_tree_draws_continuations_without_connectors_in_a_real_process(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    base = [sys.executable, "-m", "memstore.cli", "--db", db]
    run = subprocess.run([*base, "import", str(LEGACY / "branching.jsonl")], check=False)
    assert run.returncode == 0
    done = subprocess.run([*base, "tree", "branching"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "──" not in line_of(lines, "33439f6a")  # the reply that continues d5302e69
    assert "├── " in line_of(lines, "53c98980")  # one of two branches after bd6fe184
    assert "└── " in line_of(lines, "56b2bcec")  # the other
    assert "◀ head" in line_of(lines, "35e37295")
    assert len(lines) == 1 + 28  # the session, then one line per node


def chain(size: int) -> SessionGraph:
    ticks = iter(range(1, 10 * size))
    graph = SessionGraph("s", clock=lambda: next(ticks))
    for number in range(size):
        graph.append(say(f"turn-{number}"))
    return graph


def test_a_long_run_folds_between_its_ends_and_the_head() -> None:
    graph = chain(40)
    graph.branch_from(graph.path_nodes(graph.all()[-1].id)[19].id)  # the head mid-run
    lines = drawn(graph)
    turns = [line.split(": ")[1] for line in lines if ": " in line]
    assert turns == ["turn-0", "turn-1", "turn-2", "turn-19", "turn-37", "turn-38", "turn-39"]
    folds = [line.strip(" │└─") for line in lines if "turns …" in line]
    assert folds == ["… 16 turns …", "… 17 turns …"]
    assert "◀ head" in line_of(lines, "turn-19")
    assert len(drawn(graph)) == 1 + 9
    unfolded = Console(width=100, record=True, color_system=None)
    unfolded.print(render_tree(graph, fold=False))
    assert len(unfolded.export_text().splitlines()) == 1 + 40


def test_a_run_folds_only_gaps_of_two_turns_or_more() -> None:
    assert not [line for line in drawn(chain(7)) if "…" in line]
    lines = drawn(chain(8))
    assert [line.strip(" │└─") for line in lines if "…" in line] == ["… 2 turns …"]
    assert len(lines) == 1 + 7


def test_depth_stops_at_a_fork_and_counts_what_it_leaves_out() -> None:
    graph = chain(3)
    fork = graph.path_nodes(graph.all()[-1].id)[1]
    graph.append(say("main-3"))
    graph.branch_from(fork.id)
    graph.append(say("alt-2"))
    graph.append(say("alt-3"))
    shallow = Console(width=100, record=True, color_system=None)
    shallow.print(render_tree(graph, depth=0))
    lines = shallow.export_text().splitlines()
    assert [line.split(": ")[1] for line in lines if ": " in line] == ["turn-0", "turn-1"]
    assert "… 2 branches, 4 turns below, the head among them (raise --depth)" in lines[-1]
    graph.branch_from(fork.id)
    above = Console(width=100, record=True, color_system=None)
    above.print(render_tree(graph, depth=0))  # the head at the fork: drawn, not among them
    above_lines = above.export_text().splitlines()
    assert "… 2 branches, 4 turns below (raise --depth)" in above_lines[-1]
    assert "◀ head" in line_of(above_lines, "turn-1")
    graph.append(say("alt-4"))  # keeps the head last for the drawings below
    assert any("alt-3" in line for line in drawn(graph))
    deep = Console(width=100, record=True, color_system=None)
    deep.print(render_tree(graph, depth=1))  # the branches hang one fork deep: all drawn
    assert deep.export_text().splitlines() == drawn(graph)


def table_lines(table: object, width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    console.print(table)
    return console.export_text().splitlines()


ROW = ("large-session", "3000", "2026-01-03 06:36:40", "0ba4d965ed6b", "a title of some words")


def test_a_table_keeps_copyable_cells_whole_up_to_the_last_column() -> None:
    copyable = (True, True, True, True, False)
    headers = ("session", "nodes", "updated", "head", "title")
    # 13 + 7 + 19 + 12 + 12 (a text column's least) + 4 separators of 3 = 75
    for width in (75, 120):
        lines = table_lines(data_table(headers, [ROW], copyable=copyable, width=width), width)
        assert any(all(cell in line for cell in ROW[:4]) for line in lines), lines
        assert all(len(line) <= width for line in lines)
    lines = table_lines(data_table(headers, [ROW], copyable=copyable, width=74), 74)
    assert "…" not in "".join(lines)
    assert all(len(line) <= 74 for line in lines)
    assert "2026-01-03" in "".join(lines)


# --- short ids (issue 27 item 17) ---------------------------------------------------------------


def test_short_ids_are_the_shortest_prefixes_unique_in_the_session() -> None:
    from memstore.graph import short_ids

    ids = ["line-101", *(f"line-101{n}" for n in range(10)), "line-2", "abcdef0123456789"]
    short = short_ids(ids)
    assert short["line-101"] == "line-101"  # it starts the others: shown whole, resolves as itself
    assert short["line-1010"] == "line-1010"
    assert short["line-2"] == "line-2"
    assert short["abcdef0123456789"] == "abcdef01"
    assert len(set(short.values())) == len(ids)
    for node_id, prefix in short.items():
        others = [other for other in ids if other != node_id and other.startswith(prefix)]
        assert prefix == node_id or not others


def test_the_tree_shows_ids_that_show_resolves_to_the_same_node(store: SessionStore) -> None:

    graph = SessionGraph("s", clock=lambda: 1)
    ids = ["line-101", *(f"line-101{n}" for n in range(10))]
    parent = None
    for node_id in ids:
        node = graph.append({"role": "user", "blocks": [{"kind": "text", "text": node_id}]})
        stored = node.model_copy(update={"id": node_id, "parent": parent})
        store.append_node("s", stored)
        parent = node_id
    console = Console(width=200, record=True)
    console.print(render_tree(store.load_session("s"), fold=False))
    lines = console.export_text().splitlines()[1:]
    shown = [line.strip(" │├└─").split()[0] for line in lines]
    assert shown == ids
    assert [store.resolve_node_id("s", prefix) for prefix in shown] == ids
