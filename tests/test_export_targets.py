"""Where `memstore export` writes: never clobbering a device, a FIFO, another session's file or a
file's permissions, and one line (no traceback) for a target it cannot write. Real subprocesses."""

from __future__ import annotations

import fcntl
import os
import resource
import signal
import stat
import subprocess
import sys
import threading
import unicodedata
from collections.abc import Callable
from pathlib import Path

import pytest

from memstore import SessionStore
from memstore.jsonl import export_files, file_name_key
from memstore.store.files import atomic_text_file, remove_stale_temporaries

from .conftest import LEGACY

pytestmark = pytest.mark.slow  # exports through real processes, FIFOs and devices


def memstore(
    db: str,
    *args: str,
    cwd: Path | None = None,
    preexec_fn: Callable[[], object] | None = None,
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "memstore.cli", "--db", db, *args]
    return subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=cwd, preexec_fn=preexec_fn
    )


def one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("error:"), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    for word in words:
        assert word in done.stderr


@pytest.fixture
def db(sqlite_url: str) -> str:
    assert memstore(sqlite_url, "import", str(LEGACY / "branching.jsonl")).returncode == 0
    return sqlite_url


EXPECTED = (LEGACY / "branching.jsonl").read_bytes()


def test_no_output_writes_the_session_file_in_the_current_directory(
    db: str, tmp_path: Path
) -> None:
    work = tmp_path / "here"
    work.mkdir()
    done = memstore(db, "export", "branching", cwd=work)
    assert done.returncode == 0, done.stderr
    assert (work / "branching.jsonl").read_bytes() == EXPECTED
    done = memstore(db, "export", "branching", "--format", "md", cwd=work)
    assert (work / "branching.md").read_text().startswith("# ")


def test_dash_writes_standard_output_and_the_report_to_stderr(db: str) -> None:
    done = memstore(db, "export", "branching", "-o", "-")
    assert done.returncode == 0
    assert done.stdout.encode() == EXPECTED
    assert "56 lines -> -" in done.stderr


@pytest.mark.parametrize("form", ["jsonl", "md", "html"])
def test_a_fifo_is_written_as_a_stream_not_replaced(db: str, tmp_path: Path, form: str) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    done = memstore(db, "export", "branching", "--format", form, "-o", str(fifo))
    reader.join(timeout=60)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert len(received[0]) > 1000
    if form == "jsonl":
        assert received[0] == EXPECTED
    assert not list(tmp_path.glob(".memstore-*.tmp"))


def test_a_character_device_stays_a_device(db: str) -> None:
    done = memstore(db, "export", "branching", "-o", os.devnull)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_process_substitution_gets_the_stream(db: str, tmp_path: Path) -> None:
    out = tmp_path / "copied"
    script = f'"$@" -o >(cat > {out}); wait'
    command = [sys.executable, "-m", "memstore.cli", "--db", db, "export", "branching"]
    done = subprocess.run(
        ["bash", "-c", script, "bash", *command], capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    for _ in range(100):
        if out.exists() and out.stat().st_size == len(EXPECTED):
            break
        threading.Event().wait(0.05)
    assert out.read_bytes() == EXPECTED


def test_a_regular_file_keeps_its_mode_and_its_hard_links(db: str, tmp_path: Path) -> None:
    target = tmp_path / "private.jsonl"
    target.write_text("old\n")
    target.chmod(0o600)
    single = tmp_path / "single.jsonl"
    single.write_text("old\n")
    single.chmod(0o640)
    link = tmp_path / "link.jsonl"
    os.link(target, link)
    assert memstore(db, "export", "branching", "-o", str(target)).returncode == 0
    assert memstore(db, "export", "branching", "-o", str(single)).returncode == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(single.stat().st_mode) == 0o640
    assert link.read_bytes() == target.read_bytes() == single.read_bytes() == EXPECTED
    assert target.stat().st_ino == link.stat().st_ino
    assert not list(tmp_path.glob(".memstore-*.tmp"))


def test_a_directory_is_one_line(db: str, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    one_line_error(memstore(db, "export", "branching", "-o", f"{tmp_path / 'out'}/"), "directory")
    one_line_error(memstore(db, "export", "branching", "--format", "md", "-o", str(tmp_path)))


def test_export_all_onto_a_file_or_stdout_is_one_line(db: str, tmp_path: Path) -> None:
    afile = tmp_path / "afile.txt"
    afile.write_text("mine\n")
    one_line_error(memstore(db, "export", "--all", "-o", str(afile)), "not a directory")
    one_line_error(memstore(db, "export", "--all", "-o", "-"), "not a directory")
    assert afile.read_text() == "mine\n"


def test_an_unwritable_place_is_one_line(db: str, tmp_path: Path) -> None:
    afile = tmp_path / "afile.txt"
    afile.write_text("mine\n")
    one_line_error(memstore(db, "export", "branching", "-o", str(afile / "x.jsonl")), str(afile))


def test_a_full_device_is_one_line(db: str) -> None:
    one_line_error(memstore(db, "export", "branching", "-o", "/dev/full"), "No space left")


def _small_file_limit() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))


def test_a_file_that_cannot_grow_is_one_line_and_the_old_file_stays(
    postgres_url: str, tmp_path: Path
) -> None:
    db = postgres_url  # a server's database: the file size limit applies to the export only
    assert memstore(db, "import", str(LEGACY / "branching.jsonl")).returncode == 0
    target = tmp_path / "kept.jsonl"
    target.write_text("old\n")
    done = memstore(db, "export", "branching", "-o", str(target), preexec_fn=_small_file_limit)
    one_line_error(done, str(target), "too large")
    assert target.read_text() == "old\n"
    assert not list(tmp_path.glob(".memstore-*.tmp"))


def test_stale_temporaries_are_removed_but_not_one_being_written(tmp_path: Path) -> None:
    stale = tmp_path / ".memstore-dead.tmp"
    stale.write_text("left by a kill -9\n")
    live = tmp_path / ".memstore-live.tmp"
    with live.open("w") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        with atomic_text_file(tmp_path / "new.jsonl") as out:
            out.write("x\n")
        assert not stale.exists()
        assert live.exists()
    assert remove_stale_temporaries(tmp_path) == [live]


def test_a_killed_export_leaves_a_temporary_that_the_next_one_removes(
    db: str, tmp_path: Path
) -> None:
    code = (
        "import os, sys; from pathlib import Path; from memstore.store.files import "
        "atomic_text_file\nwith atomic_text_file(Path(sys.argv[1])) as out:\n"
        "    out.write('partial'); out.flush(); os.kill(os.getpid(), 9)"
    )
    target = tmp_path / "x.jsonl"
    killed = subprocess.run([sys.executable, "-c", code, str(target)], check=False)
    assert killed.returncode == -9
    assert len(list(tmp_path.glob(".memstore-*.tmp"))) == 1
    assert memstore(db, "export", "branching", "-o", str(target)).returncode == 0
    assert not list(tmp_path.glob(".memstore-*.tmp"))
    assert target.read_bytes() == EXPECTED


def test_names_never_collide_even_ignoring_case_and_normalization(tmp_path: Path) -> None:
    long_id = "a" * 255
    shortened = export_files(tmp_path, [long_id])[long_id].stem
    nfc = unicodedata.normalize("NFC", "café")
    nfd = unicodedata.normalize("NFD", "café")
    ids = [long_id, shortened, "Chat", "chat", "CHAT", nfc, nfd, "x", "X~" + "0" * 16]
    paths = export_files(tmp_path, ids)
    keys = {file_name_key(path.name) for path in paths.values()}
    assert len(keys) == len(ids)
    assert paths[shortened].stem == shortened  # an id keeps its own name before a shortened one
    assert paths["CHAT"].name == "CHAT.jsonl"  # the first in sorted order keeps its name
    assert all(len(path.name.encode()) <= 255 for path in paths.values())


def test_export_all_writes_every_session_to_its_own_file(database_url: str, tmp_path: Path) -> None:
    long_id = "a" * 255
    shortened = export_files(tmp_path, [long_id])[long_id].stem
    ids = [
        long_id,
        shortened,
        "Chat",
        "chat",
        unicodedata.normalize("NFC", "café"),
        unicodedata.normalize("NFD", "café"),
    ]
    with SessionStore(database_url) as store:
        for number, session_id in enumerate(ids):
            store.session(session_id).append(
                {"role": "user", "blocks": [{"kind": "text", "text": f"session number {number}"}]}
            )
    out = tmp_path / "out"
    done = memstore(database_url, "export", "--all", "-o", str(out))
    assert done.returncode == 0, done.stderr
    files = list(out.iterdir())
    assert len(files) == len(ids)
    assert len({file_name_key(path.name) for path in files}) == len(ids)
    contents = sorted(path.read_text() for path in files)
    for number in range(len(ids)):
        assert sum(f"session number {number}" in text for text in contents) == 1
    assert "case or accents" in done.stdout
