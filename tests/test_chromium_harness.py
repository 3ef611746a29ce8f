"""The browser tests' harness on a machine without Chromium: it skips before it makes anything, so
the suite's outcome never depends on whether Chromium is installed (a profile directory made
before the skip used to warn from its finalizer inside some unrelated later test)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from .chromium import Browser


def test_without_chromium_the_browser_skips_before_making_a_profile_or_a_pipe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CI", raising=False)  # in CI a missing Chromium fails instead
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-bin"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    open_fds = sorted(os.listdir("/proc/self/fd"))
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        Browser()
    assert list(tmp_path.iterdir()) == []
    assert sorted(os.listdir("/proc/self/fd")) == open_fds


def test_in_ci_a_missing_chromium_fails_rather_than_skips(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-bin"))
    with pytest.raises(pytest.fail.Exception, match="CI must run the browser tests"):
        Browser()
