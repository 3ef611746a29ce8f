from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstore import (
    InvalidArgumentError,
    InvalidNodeIdError,
    InvalidSessionIdError,
    InvalidTurnError,
    MemstoreError,
    SessionStore,
)
from memstore.store.transfer import import_targets

TEXT = {"role": "user", "blocks": [{"kind": "text", "text": "hi"}]}

MISUSES: dict[str, tuple[Callable[[SessionStore], Any], type[MemstoreError], str]] = {
    "a bad turn": (
        lambda store: store.session("a").append({"role": "user", "blocks": [{"kind": "image"}]}),
        InvalidTurnError,
        '(image) needs a string "mediaType"',
    ),
    "a turn that is not an object": (
        lambda store: store.session("a").append(5),  # type: ignore[arg-type]
        InvalidTurnError,
        "turn must be an object",
    ),
    "a session id that is no string": (
        lambda store: store.load_path(5),  # type: ignore[arg-type]
        InvalidSessionIdError,
        "not int",
    ),
    "a leaf that is no string": (
        lambda store: store.load_path("a", 5),  # type: ignore[arg-type]
        InvalidNodeIdError,
        "not int",
    ),
    "a negative last": (lambda store: store.load_path("a", last=-1), InvalidArgumentError, "-1"),
    "a last that is text": (
        lambda store: store.load_path("a", last="2"),  # type: ignore[arg-type]
        InvalidArgumentError,
        "'2'",
    ),
    "a zero search limit": (lambda store: store.search("hi", limit=0), InvalidArgumentError, "0"),
    "a search query that is no text": (
        lambda store: store.search(5),  # type: ignore[arg-type]
        InvalidArgumentError,
        "not int",
    ),
    "a search in a session id that is no string": (
        lambda store: store.search("hi", session_id=5),  # type: ignore[arg-type]
        InvalidSessionIdError,
        "not int",
    ),
    "a metadata filter on a list": (
        lambda store: store.sessions(metadata={"a": [1]}),
        InvalidArgumentError,
        "not list",
    ),
    "a metadata filter key that is no string": (
        lambda store: store.sessions(metadata={1: "x"}),  # type: ignore[dict-item]
        InvalidArgumentError,
        "keys are strings",
    ),
    "a metadata number too large": (
        lambda store: store.sessions(metadata={"a": 10**400}),
        InvalidArgumentError,
        "too large",
    ),
    "a negative session list limit": (
        lambda store: store.sessions(limit=-1),
        InvalidArgumentError,
        "-1",
    ),
    "a session list limit that is text": (
        lambda store: store.sessions(limit="3"),  # type: ignore[arg-type]
        InvalidArgumentError,
        "'3'",
    ),
    "session metadata that is no mapping": (
        lambda store: store.update_session("a", metadata=["x"]),  # type: ignore[arg-type]
        InvalidArgumentError,
        "metadata: a mapping with string keys, not",
    ),
    "session metadata with a key that is no string": (
        lambda store: store.update_session("a", metadata={1: "x"}),  # type: ignore[dict-item]
        InvalidArgumentError,
        "metadata: a mapping with string keys",
    ),
    "a metadata filter that is no mapping": (
        lambda store: store.sessions(metadata=["a"]),  # type: ignore[arg-type]
        InvalidArgumentError,
        "mapping",
    ),
}


@pytest.mark.parametrize("misuse", MISUSES)
def test_a_misuse_is_a_memstore_error_that_says_what_is_wrong(
    store: SessionStore, misuse: str
) -> None:
    store.session("a").append(TEXT)
    call, error, named = MISUSES[misuse]
    with pytest.raises(error, match=named.replace("(", r"\(").replace(")", r"\)")) as raised:
        call(store)
    assert isinstance(raised.value, MemstoreError)


def test_import_targets_refuses_a_session_id_for_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="is a directory"):
        import_targets(tmp_path, "x")
