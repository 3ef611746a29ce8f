"""An adapter imported without its framework says which extra to install (a fresh process in
which the framework's import is blocked, as if it were not installed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memstore._package import DISTRIBUTION

BLOCKED_IMPORT = """
import importlib, sys
sys.modules[sys.argv[1]] = None  # `import` of it now fails as if it were not installed
try:
    importlib.import_module(sys.argv[2])
except ImportError as exc:
    from memstore.errors import MemstoreError
    print(isinstance(exc, MemstoreError), exc)
"""

ADAPTERS = {
    "openai-agents": ("agents", "memstore.integrations.openai_agents"),
    "langchain": ("langchain_core", "memstore.integrations.langchain"),
    "claude-agent-sdk": ("claude_agent_sdk", "memstore.integrations.claude_agent_sdk"),
    "google-adk": ("google.adk", "memstore.integrations.google_adk"),
}


@pytest.mark.parametrize(("extra", "blocked", "module"), [(k, *v) for k, v in ADAPTERS.items()])
def test_an_adapter_without_its_framework_names_the_extra_to_install(
    extra: str, blocked: str, module: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_IMPORT, blocked, module],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.startswith(f"True {module} needs the '{extra}' extra: pip install ")
    assert f"(the '{extra}' extra of {DISTRIBUTION})" in done.stdout
    assert blocked in done.stdout  # the import that failed, for whoever digs further
