"""The folder watcher behind `memstore import --watch`: new, grown and returning files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from memstore.watch import FileWatcher, watch


def test_the_first_look_finds_every_file_then_only_changes(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    one, two = tmp_path / "a" / "one.jsonl", tmp_path / "a" / "b" / "two.jsonl"
    one.write_text("1\n")
    two.write_text("2\n")
    (tmp_path / "a" / "notes.txt").write_text("not a session\n")
    watcher = FileWatcher([tmp_path])
    assert watcher.changed() == [two, one]  # sorted by path
    assert watcher.changed() == []
    with two.open("a") as file:
        file.write("3\n")
    assert watcher.changed() == [two]
    stat = one.stat()
    os.utime(one, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # rewritten in place
    assert watcher.changed() == [one]


def test_a_removed_file_that_comes_back_is_new(tmp_path: Path) -> None:
    file = tmp_path / "s.jsonl"
    file.write_text("1\n")
    watcher = FileWatcher([tmp_path])
    assert watcher.changed() == [file]
    file.unlink()
    assert watcher.changed() == []
    file.write_text("1\n")
    assert watcher.changed() == [file]


def test_not_recursive_and_files_named_directly(tmp_path: Path) -> None:
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "x.jsonl").write_text("x\n")
    top = tmp_path / "top.jsonl"
    top.write_text("t\n")
    named = tmp_path / "deep" / "named.log"
    named.write_text("n\n")
    assert FileWatcher([tmp_path, named], recursive=False).changed() == [top, named]
    assert FileWatcher([tmp_path / "missing"]).changed() == []


def test_watch_reports_changes_until_stopped(tmp_path: Path) -> None:
    file = tmp_path / "s.jsonl"
    file.write_text("1\n")
    stop = threading.Event()
    calls: list[list[Path]] = []

    def on_change(files: list[Path]) -> None:
        calls.append(files)
        if len(calls) == 1:
            with file.open("a") as handle:
                handle.write("2\n")
        else:
            stop.set()

    watch(FileWatcher([tmp_path]), on_change, interval=0.01, stop=stop)
    assert calls == [[file], [file]]
