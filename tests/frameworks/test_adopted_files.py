"""The adopted test files keep their promises: each names its source and version and has its
framework's license beside it, and each test a file leaves out (its EXCLUDED) is listed with a
reason and is not also in the file (a test listed as left out cannot quietly run, nor one run
quietly be listed)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ADOPTED = sorted(HERE.glob("*/test_*.py"))


def test_the_adopted_files_are_found() -> None:
    names = {f"{path.parent.name}/{path.name}" for path in ADOPTED}
    assert {
        "openai_agents/test_session.py",
        "openai_agents/test_session_limit.py",
        "openai_agents/test_agent_runner.py",
        "openai_agents/test_agent_runner_streamed.py",
        "openai_agents/test_soft_cancel.py",
        "openai_agents/test_max_turns.py",
        "openai_agents/test_programmatic_tool_calling.py",
        "openai_agents/test_tool_failure_boundaries.py",
        "openai_agents/test_native_tool_failure_history.py",
        "openai_agents/test_compaction_model_visibility.py",
        "openai_agents/test_compaction_suffix.py",
        "openai_agents/test_openai_responses_compaction_session.py",
        "openai_agents/test_run_impl_resume_paths.py",
        "openai_agents/test_tool_batch_failure_history.py",
        "openai_agents/test_session_pending_async_calls.py",
        "claude_agent_sdk/test_session_store_conformance.py",
        "claude_agent_sdk/test_session_summary.py",
        "claude_agent_sdk/test_session_store_anyio.py",
    } <= names


@pytest.mark.parametrize("path", ADOPTED, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_an_adopted_file_names_its_source_and_keeps_the_license(path: Path) -> None:
    head = path.read_text(encoding="utf-8")[:1200]
    assert head.startswith("# Copyright (c) 2025 ")
    assert "Licensed under the MIT License: see LICENSE in this directory." in head
    assert "Adopted by memstore from " in head
    assert ".tar.gz)" in head  # the source distribution, with its version
    assert "MIT License" in (path.parent / "LICENSE").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", ADOPTED, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_each_test_left_out_has_a_reason_and_is_not_in_the_file(path: Path) -> None:
    module = importlib.import_module(f"tests.frameworks.{path.parent.name}.{path.stem}")
    if not hasattr(module, "EXCLUDED"):
        pytest.skip("its exclusions are expected failures, listed with their reasons elsewhere")
    excluded: dict[str, str] = module.EXCLUDED
    assert all(isinstance(reason, str) and len(reason) > 20 for reason in excluded.values())
    present = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            present.add(node.name)
        elif isinstance(node, ast.ClassDef):
            present.update(
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    assert all(name.split("::")[-1].startswith("test") for name in excluded)
    assert not set(excluded) & present
    assert any(name.split("::")[-1].startswith("test") for name in present)
