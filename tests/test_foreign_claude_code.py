"""Claude Code transcripts written by the Claude Code command line itself (the one bundled in the
`claude-agent-sdk` wheel), against the loopback Anthropic server: a subagent (its sidechain
transcript), a compaction boundary, a title and tag the SDK writes. memstore's reading of every
file must agree with the SDK's own transcript reader, and export it back byte for byte.

The SDK is installed once into `.cache/claude-agent-sdk` (git-ignored), a virtual environment of
its own; without it the tests skip, and under CI=true they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from typer.testing import CliRunner

from memstore.cli import app
from memstore.errors import JsonlError
from memstore.foreign import agent_file
from memstore.store import SessionStore

from .invoker_servers import (
    Received,
    Reply,
    anthropic_frames,
    anthropic_tool_use_frames,
    routed,
    serve,
    stream,
)
from .test_foreign import foreign_samples, snapshot
from .test_foreign_generated import missing_tool

REPO = Path(__file__).resolve().parents[1]
SDK_PACKAGE = "claude-agent-sdk==0.2.189"
SDK_DIR = REPO / ".cache" / "claude-agent-sdk"
READER = Path(__file__).parent / "claude_sdk_reader.py"
MODEL = "claude-sonnet-4-5"
SUBAGENT_TASK = "SUBAGENT-TASK: count the zebras in the enclosure"
SUMMARY = "We counted the zebras with a helper agent: three zebras."
READS: list[tuple[str, str]] = []  # (name, path) of the files a parallel turn reads


class Sdk(NamedTuple):
    """The SDK's Python and the Claude Code command line it bundles."""

    python: Path
    claude: Path


@pytest.fixture(scope="session")
def claude_sdk() -> Sdk:
    """The `claude-agent-sdk` package in its own virtual environment, installed on first use."""
    python = SDK_DIR / "bin" / "python"
    where = (
        "import claude_agent_sdk, pathlib; print(pathlib.Path(claude_agent_sdk.__file__).parent)"
    )
    installed = python.exists() and (
        subprocess.run([python, "-c", where], capture_output=True, check=False).returncode == 0
    )
    if not installed:
        subprocess.run([sys.executable, "-m", "venv", str(SDK_DIR)], check=True, timeout=300)
        install = [str(python), "-m", "pip", "install", "-q", SDK_PACKAGE]
        done = subprocess.run(install, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            missing_tool(f"pip install {SDK_PACKAGE} failed: {done.stderr[-2000:]}")
    found = subprocess.run([python, "-c", where], capture_output=True, text=True, check=True)
    return Sdk(python, Path(found.stdout.strip()) / "_bundled" / "claude")


def _last_user_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    message = [item for item in body["messages"] if item["role"] == "user"][-1]
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _answer(request: Received) -> Reply:
    """What the model says, by what it was asked: the main agent delegates to a subagent, the
    subagent reports, compaction gets its summary, anything else a short answer (every answer
    a message id of its own, as the API gives)."""
    parts = _last_user_parts(request.body)
    text = "\n".join(part["text"] for part in parts if part.get("type") == "text")
    answered = any(part.get("type") == "tool_result" for part in parts)
    if "please delegate" in text and not answered:
        task = {"description": "count zebras", "prompt": SUBAGENT_TASK}
        task["subagent_type"] = "general-purpose"
        return stream(anthropic_tool_use_frames([("toolu_01", "Agent", task)], model=MODEL))
    if "read both files" in text and not answered:
        calls = [(f"toolu_read_{name}", "Read", {"file_path": path}) for name, path in READS]
        return stream(anthropic_tool_use_frames(calls, model=MODEL))
    message_id = f"msg_{uuid.uuid4().hex}"
    thinking: list[str] = []
    if "task-notification" in text:
        answer = "Noted the helper's report."
    elif "<summary>" in text:
        answer = f"<analysis>Short.</analysis>\n<summary>{SUMMARY}</summary>"
    elif SUBAGENT_TASK in text:
        answer = "Subagent report: three zebras."
    elif answered:
        answer = (
            "Read them." if "toolu_read" in str(parts) else "The helper is counting the zebras."
        )
    else:
        answer, thinking = "Zebras are striped.", ["Easy."]
    frames = anthropic_frames([answer], thinking=thinking, model=MODEL, message_id=message_id)
    return stream(frames)


class ClaudeHome(NamedTuple):
    """A home folder whose `.claude/projects` holds the transcripts, and the project's folder."""

    home: Path
    workdir: Path
    projects: Path


def _claude(sdk: Sdk, url: str, home: Path, workdir: Path, *args: str) -> str:
    """Run Claude Code in print mode; returns the session id."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-loopback",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    command = [str(sdk.claude), "--model", MODEL, "--output-format", "json", *args]
    done = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    result = json.loads(done.stdout)
    assert not result["is_error"], result
    session_id: str = result["session_id"]
    return session_id


def _sdk(sdk: Sdk, home: Path, *args: str) -> Any:
    env = {**os.environ, "HOME": str(home)}
    command = [str(sdk.python), str(READER), *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout)


@pytest.fixture(scope="session")
def claude_home(claude_sdk: Sdk, tmp_path_factory: pytest.TempPathFactory) -> ClaudeHome:
    """Three sessions: one delegates to a subagent, is compacted, goes on, and is renamed and
    tagged through the SDK; one is a single question; one reads two files in one parallel turn
    (two tool calls in one response, whose results the transcript forks)."""
    home = tmp_path_factory.mktemp("claude-home")
    workdir = home / "zoo"
    workdir.mkdir()
    for name in ("stripes", "manes"):
        (workdir / f"{name}.txt").write_text(f"{name} of the zebras\n")
        READS.append((name, str(workdir / f"{name}.txt")))
    with serve(routed(_answer)) as server:
        main = _claude(claude_sdk, server.url, home, workdir, "-p", "please delegate")
        _claude(claude_sdk, server.url, home, workdir, "-p", "/compact", "--resume", main)
        _claude(claude_sdk, server.url, home, workdir, "-p", "and stripes?", "--resume", main)
        _claude(claude_sdk, server.url, home, workdir, "-p", "hello zebras")
        _claude(claude_sdk, server.url, home, workdir, "-p", "read both files")
    _sdk(claude_sdk, home, "rename", str(workdir), main, "Zebra census", "zoo")
    (projects,) = (home / ".claude" / "projects").iterdir()
    return ClaudeHome(home, workdir, projects)


def _records(path: Path) -> dict[str, dict[str, Any]]:
    """A transcript's records that have a uuid, by uuid."""
    values = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {v["uuid"]: v for v in values if isinstance(v, dict) and "uuid" in v}


def _visible(record: dict[str, Any]) -> bool:
    """Whether the SDK shows a record as a message (its `_is_visible_message`)."""
    hidden = record.get("isMeta") or record.get("teamName")
    return record["type"] in ("user", "assistant") and not hidden


@pytest.mark.slow
def test_memstore_reads_every_transcript_as_the_sdk_does(
    claude_sdk: Sdk, claude_home: ClaudeHome, store: SessionStore, tmp_path: Path
) -> None:
    sdk = _sdk(claude_sdk, claude_home.home, "read", str(claude_home.workdir))
    report = store.import_claude_code(claude_home.projects)
    files = {item.session_id: item.path for item in report.files}
    main_sessions = {sid for sid in files if "~" not in sid}
    assert main_sessions == set(sdk)
    for session_id, seen in sdk.items():
        info = store.session_info(session_id)
        records = _records(files[session_id])
        path = [node.id for node in store.load_path_nodes(session_id)]
        assert [node for node in path if _visible(records[node])] == seen["chain"]
        assert info.title == seen["info"]["custom_title"]
        assert info.metadata["cwd"] == seen["info"]["cwd"]
        assert info.metadata["gitBranch"] == seen["info"]["git_branch"]
        assert set(info.tags) == ({seen["info"]["tag"]} if seen["info"]["tag"] else set())
        children = {sid.split("~agent-")[1] for sid in files if sid.startswith(f"{session_id}~")}
        assert children == set(seen["subagents"])
        for agent_id, chain in seen["subagents"].items():
            child = f"{session_id}~agent-{agent_id}"
            assert store.session_info(child).metadata["parentSession"] == session_id
            child_records = _records(files[child])
            child_path = [node.id for node in store.load_path_nodes(child)]
            assert [node for node in child_path if _visible(child_records[node])] == chain
    for session_id, source in files.items():
        out = tmp_path / f"{session_id}.jsonl"
        store.export_jsonl(session_id, out)
        assert out.read_bytes() == source.read_bytes()
    assert all(item.unchanged for item in store.import_claude_code(claude_home.projects).files)


def test_the_sessions_hold_a_subagent_a_sidechain_and_a_compaction(
    claude_home: ClaudeHome, store: SessionStore
) -> None:
    report = store.import_claude_code(claude_home.projects)
    by_id = {item.session_id: item for item in report.files}
    (child,) = [sid for sid in by_id if "~agent-" in sid]
    parent = child.split("~")[0]
    parent_records = _records(by_id[parent].path)
    child_records = _records(by_id[child].path)
    assert all(record.get("isSidechain") for record in child_records.values())
    assert store.session_info(child).metadata["sidechainNodes"] == by_id[child].nodes
    calls = store.read_only_query(
        f"SELECT tool_name, result_node_id FROM tool_calls WHERE session_id = '{parent}'"
    ).rows
    assert [row[0] for row in calls] == ["Agent"]
    assert calls[0][1] is not None
    boundary = [r for r in parent_records.values() if r.get("subtype") == "compact_boundary"]
    summary = [r for r in parent_records.values() if r.get("isCompactSummary")]
    assert len(boundary) == len(summary) == 1
    node = store.load_session(parent).get(summary[0]["uuid"])
    assert node is not None
    assert node.parent is None  # a compaction boundary starts a new root, as the SDK reads it
    condensed = node.turn.to_json()["memstore"]["condensed"]
    assert condensed == {"fromNodeId": boundary[0]["logicalParentUuid"], "source": "claude-code"}
    assert [hit.node_id for hit in store.search("helper agent three", session_id=parent)] == [
        summary[0]["uuid"]
    ]
    usage = store.read_only_query(
        "SELECT count(*), min(model), sum(output_tokens) FROM node_usage "
        f"WHERE session_id = '{parent}'"
    ).rows[0]
    assistants = [r for r in parent_records.values() if r["type"] == "assistant"]
    assert tuple(usage[:2]) == (len(assistants), MODEL)


def _main_transcript(claude_home: ClaudeHome) -> Path:
    """The session with the subagent and the compaction."""
    return next(
        path for path in claude_home.projects.glob("*.jsonl") if path.with_suffix("").is_dir()
    )


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.93])
def test_a_transcript_cut_anywhere_imports_its_whole_lines(
    claude_home: ClaudeHome, store: SessionStore, tmp_path: Path, fraction: float
) -> None:
    data = _main_transcript(claude_home).read_bytes()
    cut = data[: int(len(data) * fraction)]
    copy = tmp_path / "cut.jsonl"
    copy.write_bytes(cut)
    item = store.import_claude_code(copy).files[0]
    assert item.records == cut.count(b"\n")
    assert len(item.warnings) == (0 if cut.endswith(b"\n") else 1)
    out = tmp_path / "out.jsonl"
    store.export_jsonl("cut", out)
    assert out.read_bytes() == cut[: cut.rfind(b"\n") + 1]
    copy.write_bytes(data)
    assert store.import_claude_code(copy).files[0].records == data.count(b"\n") - item.records
    store.export_jsonl("cut", out)
    assert out.read_bytes() == data


def test_a_corrupted_transcript_line_is_refused_and_nothing_written(
    claude_home: ClaudeHome, store: SessionStore, tmp_path: Path
) -> None:
    store.import_claude_code(claude_home.projects)
    before = snapshot(store)
    lines = _main_transcript(claude_home).read_bytes().splitlines(keepends=True)
    for number in (1, len(lines) // 2, len(lines) - 1):
        broken = list(lines)
        broken[number - 1] = broken[number - 1][:-20] + b"\n"
        copy = tmp_path / "broken.jsonl"
        copy.write_bytes(b"".join(broken))
        with pytest.raises(JsonlError) as refused:
            store.import_claude_code(copy)
        assert refused.value.line == number
        assert snapshot(store) == before


def test_a_transcript_missing_a_parent_keeps_the_orphan_as_a_root(
    claude_home: ClaudeHome, store: SessionStore, tmp_path: Path
) -> None:
    source = _main_transcript(claude_home)
    lines = source.read_bytes().splitlines(keepends=True)
    records = [json.loads(line) for line in lines]
    gone = next(i for i, r in enumerate(records) if r.get("type") == "assistant")
    orphans = [i for i, r in enumerate(records) if r.get("parentUuid") == records[gone]["uuid"]]
    copy = tmp_path / "orphan.jsonl"
    copy.write_bytes(b"".join(lines[:gone] + lines[gone + 1 :]))
    item = store.import_claude_code(copy).files[0]
    assert [w.split(": ")[0] for w in item.warnings] == [f"{copy}:{i}" for i in orphans]
    graph = store.load_session("orphan")
    for i in orphans:
        node = graph.get(records[i]["uuid"])
        assert node is None or node.parent is None
    out = tmp_path / "out.jsonl"
    store.export_jsonl("orphan", out)
    assert out.read_bytes() == copy.read_bytes()


def test_export_all_to_claude_code_makes_a_projects_folder_the_sdk_reads_alike(
    claude_sdk: Sdk, claude_home: ClaudeHome, sqlite_url: str, tmp_path: Path
) -> None:
    with SessionStore(sqlite_url) as store:
        store.import_claude_code(claude_home.projects)
    home = tmp_path / "home"
    command = ["--db", sqlite_url, "export", "--all", "--to", "claude-code"]
    result = CliRunner().invoke(app, [*command, "-o", str(home / ".claude" / "projects")])
    assert result.exit_code == 0, result.output
    originals = claude_home.projects.parent
    written = sorted(
        path.relative_to(home / ".claude" / "projects")
        for path in (home / ".claude/projects").rglob("*.jsonl")
    )
    assert written == sorted(path.relative_to(originals) for path in originals.rglob("*.jsonl"))
    for name in written:
        assert (home / ".claude/projects" / name).read_bytes() == (originals / name).read_bytes()

    def read(where: Path) -> Any:
        sessions = _sdk(claude_sdk, where, "read", str(claude_home.workdir))
        for seen in sessions.values():
            seen["listed"].pop("last_modified")
            seen["info"].pop("last_modified")
        return sessions

    assert read(home) == read(claude_home.home)


def test_agent_file_names_the_project_folders_the_sdk_looks_in(
    claude_sdk: Sdk, tmp_path: Path
) -> None:
    cwds = ["/work/demo", "/home/ü/my project.v2", "/" + "deep/" * 60, "C:\\Users\\x"]
    expected = _sdk(claude_sdk, tmp_path, "folders", *cwds)
    names = [agent_file(tmp_path, "claude-code", "s", {"cwd": cwd}).parent.name for cwd in cwds]
    assert names == expected
    assert len(expected[2]) > 200  # the long one is cut and hashed


def test_a_parallel_turn_keeps_every_call_and_result_on_the_head_path(
    claude_home: ClaudeHome, store: SessionStore
) -> None:
    store.import_claude_code(claude_home.projects)
    (session,) = [info.id for info in store.sessions() if _reads(store, info.id)]
    path = store.load_path(session)
    kinds = [(turn.role, [block.kind for block in turn.blocks]) for turn in path]
    assert kinds == [
        ("user", ["text"]),
        ("assistant", ["tool_call"]),
        ("assistant", ["tool_call"]),
        ("user", ["tool_result"]),
        ("user", ["tool_result"]),
        ("assistant", ["text"]),
    ]
    answered = store.read_only_query(
        f"SELECT count(*) FROM tool_calls WHERE session_id = '{session}' "
        "AND result_node_id IS NOT NULL"
    ).rows[0][0]
    assert answered == 2
    assert store.session_info(session).branch_count == 1


def _reads(store: SessionStore, session_id: str) -> bool:
    sql = (
        f"SELECT count(*) FROM tool_calls WHERE session_id = '{session_id}' AND tool_name = 'Read'"
    )
    return bool(store.read_only_query(sql).rows[0][0])


def test_memstore_reads_the_shared_samples_as_the_sdk_does(
    claude_sdk: Sdk, store: SessionStore, tmp_path: Path
) -> None:
    files = sorted((foreign_samples() / "claude-code").glob("*.jsonl"))
    chains = _sdk(claude_sdk, tmp_path, "chain", *map(str, files))
    for path, chain in zip(files, chains, strict=True):
        store.import_claude_code(path)
        records = _records(path)
        head_path = [node.id for node in store.load_path_nodes(path.stem)]
        assert [node for node in head_path if _visible(records[node])] == chain, path.name
