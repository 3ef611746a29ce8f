"""Exports as store operations (`export_session`, `export_sessions`), sync and async, on SQLite
and PostgreSQL; and `memstore export --all --to` refusing only the sessions it cannot place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memstore.cli import app
from memstore.errors import InvalidArgumentError, OutputFileError, StoreError, UnknownSessionError
from memstore.store import SessionStore
from memstore.store.exports import ExportedFile, ExportFormat, RefusedExport

from .conftest import LEGACY
from .foreign_lines import pi_lines, write_lines

BRANCHING = LEGACY / "branching.jsonl"
LONG_CWD = "/" + "x" * 400  # pi's folder for it: a name of 404 bytes, more than any file system


def write_pi(folder: Path, session_id: str, cwd: str) -> Path:
    """A pi session file whose header names `cwd`."""
    lines = pi_lines(session_id, 1)
    header = json.loads(lines[0])
    header["cwd"] = cwd
    lines[0] = json.dumps(header).encode() + b"\n"
    path = folder / f"{session_id}.jsonl"
    write_lines(path, lines)
    return path


# --- the library ---------------------------------------------------------------------------------


def test_export_session_writes_each_format_and_says_how_much(
    store: SessionStore, tmp_path: Path
) -> None:
    store.import_jsonl(BRANCHING)
    jsonl = store.export_session("branching", tmp_path / "b.jsonl")
    lines = len(BRANCHING.read_bytes().splitlines())
    assert jsonl == ExportedFile("branching", tmp_path / "b.jsonl", ExportFormat.JSONL, lines=lines)
    assert jsonl.path.read_bytes() == BRANCHING.read_bytes()
    markdown = store.export_session("branching", tmp_path / "b.MD")
    assert markdown.format is ExportFormat.MD
    assert markdown.size == len(markdown.path.read_bytes())
    assert markdown.path.read_text().startswith("# ")
    page = store.export_session("branching", tmp_path / "page.txt", format="html")
    assert page.format is ExportFormat.HTML
    assert page.path.read_text().lower().startswith("<!doctype html>")


def test_export_session_refuses_an_unknown_session_format_or_agent(
    store: SessionStore, tmp_path: Path
) -> None:
    store.import_jsonl(BRANCHING)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(UnknownSessionError, match="nope"):
        store.export_session("nope", out / "x.jsonl")
    with pytest.raises(InvalidArgumentError, match="unknown export format 'pdf'"):
        store.export_session("branching", out / "x", format="pdf")
    with pytest.raises(InvalidArgumentError, match="unknown agent 'codex'"):
        store.export_session("branching", out / "x", agent="codex")
    with pytest.raises(InvalidArgumentError, match="JSONL"):
        store.export_session("branching", out / "x", format="md", agent="pi")
    with pytest.raises(StoreError, match="came from memstore, not pi"):
        store.export_session("branching", out / "x.jsonl", agent="pi")
    assert not list(out.iterdir())  # nothing written, not even a temporary


def test_export_session_writes_an_agents_session_back_byte_for_byte(
    store: SessionStore, tmp_path: Path
) -> None:
    source = write_pi(tmp_path / "in", "p1", "/work/demo")
    store.import_foreign(source)
    done = store.export_session("p1", tmp_path / "p1.jsonl", agent="pi")
    assert done.path.read_bytes() == source.read_bytes()


def test_export_sessions_names_every_file_and_says_why_one_is_renamed(
    store: SessionStore, tmp_path: Path
) -> None:
    store.import_jsonl(BRANCHING)
    store.import_jsonl(BRANCHING, session_id="Branching")  # the same name where case is ignored
    report = store.export_sessions(tmp_path / "out", format="md")
    assert report.complete
    assert [item.session_id for item in report.files] == ["Branching", "branching"]
    plain, renamed = sorted(report.files, key=lambda item: item.renamed is not None)
    assert plain.path.name == f"{plain.session_id}.md"
    assert "case or accents" in (renamed.renamed or "")
    assert renamed.path.name.endswith(".md")
    assert renamed.path.exists()


def test_export_sessions_into_a_file_is_refused(store: SessionStore, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(OutputFileError, match="not a directory"):
        store.export_sessions(afile)
    with pytest.raises(OutputFileError, match="not a directory"):
        store.export_sessions("-")


def test_export_sessions_to_an_agent_refuses_only_the_sessions_it_cannot_place(
    store: SessionStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Issue 27 item 7: a cwd too long for a folder name, a NUL in it (SQLite only: PostgreSQL
    cannot store one), a folder that is a link out of the directory; the others are written."""
    sources = tmp_path / "in"
    good = write_pi(sources, "good", "/work/demo")
    write_pi(sources, "long", LONG_CWD)
    write_pi(sources, "escapes", "/work/escapes")
    on_sqlite = "sqlite" in request.node.callspec.id
    if on_sqlite:
        write_pi(sources, "nul", "/work/a\0b")
    store.import_foreign(sources)
    out = tmp_path / "out"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out.mkdir()
    (out / "--work-escapes--").symlink_to(elsewhere)

    report = store.export_sessions(out, agent="pi")

    assert [(item.session_id, item.path) for item in report.files] == [
        ("good", out / "--work-demo--" / "good.jsonl")
    ]
    assert report.files[0].path.read_bytes() == good.read_bytes()
    reasons = {item.session_id: item.reason for item in report.refused}
    assert sorted(reasons) == sorted(["escapes", "long", *(["nul"] if on_sqlite else [])])
    assert "outside" in reasons["escapes"]
    assert "404 bytes" in reasons["long"]
    if on_sqlite:
        assert "NUL" in reasons["nul"]
    assert not report.complete
    assert not list(elsewhere.iterdir())


def test_export_sessions_refuses_a_session_whose_file_cannot_be_written(
    store: SessionStore, tmp_path: Path
) -> None:
    store.import_jsonl(BRANCHING)
    store.import_jsonl(BRANCHING, session_id="other")
    out = tmp_path / "out"
    (out / "other.jsonl").mkdir(parents=True)  # a directory where its file would go
    report = store.export_sessions(out)
    assert [item.session_id for item in report.files] == ["branching"]
    assert report.refused == [
        RefusedExport("other", f"{out / 'other.jsonl'} is a directory: name a file to write")
    ]


def test_both_stores_have_the_export_operations() -> None:
    from memstore.store.aio import AsyncSessionStore

    for name in ("export_session", "export_sessions"):
        assert getattr(SessionStore, name).__doc__
        assert getattr(AsyncSessionStore, name).__doc__


# --- the command line ----------------------------------------------------------------------------


def test_export_all_to_pi_gives_each_refused_session_one_line_and_writes_the_others(
    sqlite_url: str, tmp_path: Path
) -> None:
    """Issue 27 item 7, as the command line shows it: no traceback, exit status 1."""
    sources = tmp_path / "in"
    good = write_pi(sources, "good", "/work/demo")
    write_pi(sources, "long", LONG_CWD)
    write_pi(sources, "nul", "/work/a\0b")
    write_pi(sources, "escapes", "/work/escapes")
    with SessionStore(sqlite_url) as store:
        store.import_foreign(sources)
    out = tmp_path / "out"
    out.mkdir()
    (out / "--work-escapes--").symlink_to(tmp_path)
    result = CliRunner().invoke(
        app, ["--db", sqlite_url, "export", "--all", "--to", "pi", "-o", str(out)]
    )
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.stderr
    errors = result.stderr.strip().split("\n")
    assert len(errors) == 3, errors
    for session, why in [("escapes", "outside"), ("long", "404 bytes"), ("nul", "NUL")]:
        (line,) = [line for line in errors if f"session '{session}' not exported" in line]
        assert why in line
    assert "good: " in result.stdout
    assert (out / "--work-demo--" / "good.jsonl").read_bytes() == good.read_bytes()


def test_export_all_with_nothing_refused_exits_zero(sqlite_url: str, tmp_path: Path) -> None:
    with SessionStore(sqlite_url) as store:
        store.import_jsonl(BRANCHING)
    runner = CliRunner()
    result = runner.invoke(app, ["--db", sqlite_url, "export", "--all", "-o", str(tmp_path)])
    assert (result.exit_code, result.stderr) == (0, "")
    assert (tmp_path / "branching.jsonl").read_bytes() == BRANCHING.read_bytes()
