"""Watching folders for new and grown session files, so an import keeps up with live agents.

Polling, not OS notifications: it needs no dependency, works the same on every platform and on
network file systems, and an agent's session file changes at most a few times a second.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["FileWatcher", "watch"]


class FileWatcher:
    """The `*.jsonl` files under some paths that appeared or changed (size or modification
    time) since the last look; the first look finds them all."""

    def __init__(self, paths: Sequence[Path], *, recursive: bool = True) -> None:
        self.paths = list(paths)
        self.recursive = recursive
        self.seen: dict[Path, tuple[int, int]] = {}

    def files(self) -> list[Path]:
        """Every session file under the paths now (a path that is a file is itself)."""
        found: list[Path] = []
        for path in self.paths:
            if path.is_dir():
                pattern = path.rglob if self.recursive else path.glob
                found.extend(sorted(item for item in pattern("*.jsonl") if item.is_file()))
            elif path.is_file():
                found.append(path)
        return found

    def changed(self) -> list[Path]:
        """The files that are new or changed since the last call; a file that vanished is
        forgotten, so it counts as new if it comes back."""
        changed: list[Path] = []
        present: dict[Path, tuple[int, int]] = {}
        for file in self.files():
            try:
                stat = file.stat()
            except FileNotFoundError:  # removed between the listing and now
                continue
            present[file] = (stat.st_size, stat.st_mtime_ns)
            if self.seen.get(file) != present[file]:
                changed.append(file)
        self.seen = present
        return changed


def watch(
    watcher: FileWatcher,
    on_change: Callable[[list[Path]], None],
    *,
    interval: float,
    stop: threading.Event,
) -> None:
    """Call `on_change` with the new or changed files, at once and then every `interval`
    seconds, until `stop` is set (or the caller is interrupted)."""
    while not stop.is_set():
        changed = watcher.changed()
        if changed:
            on_change(changed)
        stop.wait(interval)
