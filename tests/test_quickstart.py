"""The README's first quickstart command works on a clean checkout, exactly as written."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def quickstart_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section, flags=re.DOTALL)


def test_the_readme_has_the_two_commands_and_ci_runs_the_second() -> None:
    install_and_run, install_and_test = quickstart_commands()
    assert "memstore demo" in install_and_run
    assert install_and_test.endswith("pytest")
    assert install_and_test in (ROOT / ".ci" / "run").read_text()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to make a clean checkout")
def test_the_first_quickstart_command_runs_on_a_clean_checkout(tmp_path: Path) -> None:
    checkout = tmp_path / "memstore"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(checkout)], check=True)
    # The checkout holds the committed tree; bring in the working tree's files so the test
    # checks what is about to be committed.
    for tracked in subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split():
        source = ROOT / tracked
        if source.is_file():
            (checkout / tracked).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, checkout / tracked)
    install_and_run = quickstart_commands()[0]
    done = subprocess.run(
        ["bash", "-c", install_and_run],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "byte-identical to the original: True" in done.stdout
    assert (checkout / "memstore.db").is_file()
