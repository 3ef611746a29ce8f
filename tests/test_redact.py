"""Redaction before storing: `memstore.redact.secrets()` removes every secret of a generated
corpus and changes nothing else (no other character, no signature, no id); a store's `redact=`
runs on every turn before it is hashed, on every way in."""

from __future__ import annotations

import json
import string
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import InvalidArgumentError, JsonlError, SessionStore, Turn, jsjson
from memstore.hashing import hash_node
from memstore.redact import redact_text, secrets
from memstore.types import parse_turn

REDACT = secrets()

# Filler that can never form or extend a secret: no upper case, no `-`, `_`, `:`, `/` or `@`.
_FILLER = st.text(alphabet="aeiou0123456789 .,;!?()\n\té漢🙂\"'", max_size=30)
_SEPARATOR = st.sampled_from([" ", "\n", '"', "(", ", ", "\t"])
_ALNUM = string.ascii_letters + string.digits


def _chars(alphabet: str, low: int, high: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=low, max_size=high)


def _whole(name: str, secret: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, str]]:
    return secret.map(lambda text: (text, f"[REDACTED:{name}]"))


_UPPER = string.ascii_uppercase + string.digits
_URLSAFE = _ALNUM + "-_"
_PEM_BODY = _chars(_ALNUM + "+/=\n", 1, 200)

SECRETS: st.SearchStrategy[tuple[str, str]] = st.one_of(
    _whole(
        "openai-key",
        st.tuples(st.sampled_from(["", "proj-", "svcacct-"]), _chars(_URLSAFE, 20, 60)).map(
            lambda p: "sk-" + "".join(p)
        ),
    ),
    _whole("anthropic-key", _chars(_URLSAFE, 20, 90).map(lambda s: "sk-ant-api03-" + s)),
    _whole(
        "aws-access-key",
        st.tuples(st.sampled_from(["AKIA", "ASIA"]), _chars(_UPPER, 16, 16)).map("".join),
    ),
    _whole(
        "github-token",
        st.tuples(st.sampled_from(["ghp_", "gho_", "ghs_"]), _chars(_ALNUM, 36, 40)).map("".join),
    ),
    _whole("github-token", _chars(_ALNUM + "_", 22, 82).map(lambda s: "github_pat_" + s)),
    _whole(
        "slack-token",
        st.tuples(st.sampled_from(["xoxb-", "xoxp-", "xoxa-"]), _chars(_ALNUM + "-", 10, 50)).map(
            "".join
        ),
    ),
    _whole("google-api-key", _chars(_URLSAFE, 35, 35).map(lambda s: "AIza" + s)),
    _whole(
        "stripe-key",
        st.tuples(
            st.sampled_from(["sk_live_", "rk_live_", "sk_test_"]), _chars(_ALNUM, 16, 40)
        ).map("".join),
    ),
    _whole(
        "jwt",
        st.tuples(_chars(_URLSAFE, 4, 40), _chars(_URLSAFE, 4, 80), _chars(_URLSAFE, 8, 60)).map(
            lambda p: f"eyJ{p[0]}.eyJ{p[1]}.{p[2]}"
        ),
    ),
    _whole(
        "private-key",
        st.tuples(st.sampled_from(["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "]), _PEM_BODY).map(
            lambda p: f"-----BEGIN {p[0]}PRIVATE KEY-----\n{p[1]}\n-----END {p[0]}PRIVATE KEY-----"
        ),
    ),
    st.tuples(
        st.sampled_from(["Authorization: Bearer ", "authorization: bearer ", "Bearer\t"]),
        _chars(_ALNUM + "-._~+/", 16, 60),
    ).map(lambda p: (p[0] + p[1], p[0] + "[REDACTED:bearer-token]")),
    st.tuples(
        st.sampled_from(["https", "postgresql", "redis", "git+ssh"]),
        _chars(string.ascii_lowercase, 1, 10),
        _chars(_ALNUM + "!$%*-._~", 1, 30),
    ).map(
        lambda p: (
            f"{p[0]}://{p[1]}:{p[2]}@host.example/db",
            f"{p[0]}://{p[1]}:[REDACTED:url-password]@host.example/db",
        )
    ),
)


@st.composite
def texts(draw: st.DrawFn) -> tuple[str, str]:
    """A string with secrets at random places, and what it must become."""
    start = draw(_FILLER)
    original, expected = [start], [start]
    for _ in range(draw(st.integers(0, 4))):
        secret, marker = draw(SECRETS)
        before, after = draw(_SEPARATOR), draw(_SEPARATOR)
        filler = draw(_FILLER)
        original += [before, secret, after, filler]
        expected += [before, marker, after, filler]
    return "".join(original), "".join(expected)


def _json_values(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaf | st.integers() | st.booleans() | st.none(),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["a", "id", "q", "url"]), inner, max_size=3)
        ),
        max_leaves=8,
    )


@st.composite
def turns(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A turn with secrets in every kind of field (and in its signatures, ids and images, which
    must stay), and the turn it must become."""

    def text() -> tuple[str, str]:
        return draw(texts())

    def value() -> tuple[Any, Any]:
        # A JSON value whose strings hold secrets: drawn as a tree of pair-indices.
        leaves: list[tuple[str, str]] = []

        def leaf(_: int) -> int:
            leaves.append(text())
            return len(leaves) - 1

        shape = draw(_json_values(st.integers(0, 0).map(leaf)))

        def build(node: Any, side: int) -> Any:
            if isinstance(node, list):
                return [build(item, side) for item in node]
            if isinstance(node, dict):
                return {key: build(item, side) for key, item in node.items()}
            if isinstance(node, int) and not isinstance(node, bool) and 0 <= node < len(leaves):
                return leaves[node][side]
            return node

        return build(shape, 0), build(shape, 1)

    secret, _ = draw(SECRETS)  # what ids and signatures hold: kept as they are
    blocks: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for kind in draw(
        st.lists(
            st.sampled_from(["text", "thinking", "call", "result", "json", "image", "unknown"]),
            min_size=1,
            max_size=5,
        )
    ):
        if kind in ("text", "thinking"):
            a, b = text()
            extra = {"signature": secret} if kind == "thinking" else {}
            blocks.append(({"kind": kind, "text": a, **extra}, {"kind": kind, "text": b, **extra}))
        elif kind == "call":
            a, b = value()
            fixed = {"kind": "tool_call", "id": secret, "name": "fetch"}
            blocks.append(({**fixed, "input": a}, {**fixed, "input": b}))
        elif kind == "result":
            a, b = value()
            fixed = {"kind": "tool_result", "callId": secret}
            blocks.append(({**fixed, "output": a}, {**fixed, "output": b}))
        elif kind == "json":  # a tool's output as a string of JSON, secrets escaped inside
            a, b = value()
            fixed = {"kind": "tool_result", "callId": "c1"}
            blocks.append(
                ({**fixed, "output": jsjson.dumps(a)}, {**fixed, "output": jsjson.dumps(b)})
            )
        elif kind == "image":
            image = {"kind": "image", "mediaType": "image/png", "dataBase64": secret}
            blocks.append((image, image))
        else:
            a, b = text()
            fixed = {"kind": "redacted_thinking", "data": "x", "encrypted_content": secret}
            blocks.append(({**fixed, "note": a}, {**fixed, "note": b}))
    role = draw(st.sampled_from(["user", "assistant"]))
    return (
        {"role": role, "blocks": [a for a, _ in blocks]},
        {"role": role, "blocks": [b for _, b in blocks]},
    )


@given(texts())
def test_every_secret_in_a_text_becomes_its_marker_and_nothing_else_changes(
    case: tuple[str, str],
) -> None:
    original, expected = case
    assert redact_text(original) == expected
    assert redact_text(expected) == expected  # a second pass changes nothing


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=150)
@given(turns())
def test_the_redactor_reaches_every_field_and_keeps_signatures_ids_and_images(
    case: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    original, expected = case
    redacted = REDACT(parse_turn(original))
    assert redacted.json_text() == parse_turn(expected).json_text()
    assert REDACT(redacted) is redacted  # nothing left to redact: the same turn back


def test_a_turn_without_secrets_comes_back_as_the_same_object() -> None:
    turn = parse_turn({"role": "user", "blocks": [{"kind": "text", "text": "sk-short, AKIA1"}]})
    assert REDACT(turn) is turn


# --- the store: every way in -------------------------------------------------------------


_KEY = "sk-proj-" + "a1B2" * 8
_SECRET_TURN = {
    "role": "assistant",
    "blocks": [
        {"kind": "thinking", "text": f"use {_KEY}", "signature": _KEY},
        {"kind": "tool_call", "id": "call_1", "name": "env", "input": {"key": _KEY}},
    ],
}
_CLEAN = {
    "role": "assistant",
    "blocks": [
        {"kind": "thinking", "text": "use [REDACTED:openai-key]", "signature": _KEY},
        {
            "kind": "tool_call",
            "id": "call_1",
            "name": "env",
            "input": {"key": "[REDACTED:openai-key]"},
        },
    ],
}


def _plain(text: str) -> dict[str, Any]:
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


def test_appends_batches_keyed_appends_and_handles_store_the_redacted_turn(
    open_store: Callable[..., SessionStore],
) -> None:
    store = open_store(redact=secrets())
    node = store.append("s", _SECRET_TURN, created_at=5)
    # The id is the content address of the redacted turn: as if it had been appended so.
    assert node.id == hash_node(None, parse_turn(_CLEAN), 5)
    assert node.turn == parse_turn(_CLEAN)
    batch = store.append_many("s", [_plain(f"key={_KEY}"), _SECRET_TURN], created_at=6)
    assert batch[0].id == hash_node(node.id, parse_turn(_plain("key=[REDACTED:openai-key]")), 6)
    keyed = store.append_keyed("s", [_SECRET_TURN, _SECRET_TURN], ["k", "k"])
    assert [n.turn for n in keyed] == [parse_turn(_CLEAN)]
    handle = store.session("s")
    handle.append(_plain(f"Authorization: Bearer {_KEY}"))
    path = store.load_path("s")
    assert [turn.json_text() for turn in path][-1] == parse_turn(
        _plain("Authorization: Bearer [REDACTED:bearer-token]")
    ).json_text()
    assert all(_KEY not in turn.json_text().replace(f'"signature":"{_KEY}"', "") for turn in path)
    assert store.search("a1B2a1B2") == []
    # A store without a redactor on the same database stores the turn as given.
    plain = open_store()
    assert plain.append("t", _SECRET_TURN).turn == parse_turn(_SECRET_TURN)


def test_a_redactor_that_fails_or_returns_no_turn_writes_nothing(
    open_store: Callable[..., SessionStore],
) -> None:
    def broken(turn: Turn) -> Turn:
        raise ValueError("no")

    store = open_store(redact=broken)
    with pytest.raises(InvalidArgumentError, match="redactor"):
        store.append_many("s", [_plain("a")])
    store = open_store(redact=lambda turn: "not a turn")
    with pytest.raises(InvalidArgumentError, match="returned a str"):
        store.append("s", _plain("a"))
    assert store.head("s") is None
    # A redactor may return the wire dict of a turn.
    store = open_store(redact=lambda turn: {**turn.to_json(), "role": "user"})
    assert store.append("s", {**_plain("a"), "role": "assistant"}).turn.role == "user"


def test_an_adapter_writes_through_the_redactor(database_url: str) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import HumanMessage

    from memstore.integrations.langchain import MemstoreChatMessageHistory

    with SessionStore(database_url, redact=secrets()) as store:
        history = MemstoreChatMessageHistory("s", store)
        history.add_messages([HumanMessage(f"my key is {_KEY}")])
        assert [m.content for m in history.messages] == ["my key is [REDACTED:openai-key]"]


# --- imports ---------------------------------------------------------------------------------


def _same_session(store: SessionStore, reference: SessionStore, folder: Path) -> bytes:
    """Check that session "r" of `store` is session "ref" of `reference`: the same ids, and
    the same export; returns the export's bytes."""
    assert [n.id for n in store.load_path_nodes("r")] == [
        n.id for n in reference.load_path_nodes("ref")
    ]
    ours, theirs = folder / "ours.jsonl", folder / "theirs.jsonl"
    store.export_jsonl("r", ours)
    reference.export_jsonl("ref", theirs)
    assert ours.read_bytes() == theirs.read_bytes()
    return ours.read_bytes()


def test_a_jsonl_import_stores_redacted_lines_under_the_redacted_ids_and_counts_them(
    open_store: Callable[..., SessionStore], tmp_path: Path
) -> None:
    turns = [_plain("hello"), _SECRET_TURN, _plain("after"), _plain(f"token {_KEY}")]
    usage = [None, None, None, {"input_tokens": 7, "output_tokens": 2}]
    source = open_store()
    source.append_many("s", turns, created_at=100, usage=usage)
    source.append("s", _plain("last"), created_at=200)
    original = tmp_path / "s.jsonl"
    source.export_jsonl("s", original)

    store = open_store(redact=secrets())
    report = store.import_jsonl(original, session_id="r")  # one database: other sessions
    assert (report.redacted, report.files[0].redacted, report.nodes) == (2, 2, 5)
    # The same session as appending the redacted turns directly: the same ids and lines.
    reference = open_store()
    redacted = [parse_turn(REDACT(parse_turn(turn))) for turn in turns]
    reference.append_many("ref", redacted, created_at=100, usage=usage)
    reference.append("ref", _plain("last"), created_at=200)
    ours = _same_session(store, reference, tmp_path)
    assert b"a1B2a1B2" not in ours.replace(f'"signature":"{_KEY}"'.encode(), b"")
    # The lines the redactor left alone are kept byte for byte (the first node and its head).
    assert ours.splitlines()[:2] == original.read_bytes().splitlines()[:2]
    # Without secrets the count is 0 and the import is the plain one.
    clean = tmp_path / "clean.jsonl"
    reference.export_jsonl("ref", clean)
    assert open_store(redact=secrets()).import_jsonl(clean).redacted == 0


def test_a_redacted_import_moves_the_writers_keys_to_the_redacted_ids(
    open_store: Callable[..., SessionStore], tmp_path: Path
) -> None:
    """A key line follows its node to the id the redaction gives it (as usage lines do), so the
    imported session still holds every key: the same keyed append adds nothing."""
    turns = [_plain("hello"), _SECRET_TURN, _plain("after")]
    source = open_store()
    source.append_keyed("s", turns, ["k1", "k2", "k3"])
    original = tmp_path / "s.jsonl"
    source.export_jsonl("s", original)

    store = open_store(redact=secrets())
    assert store.import_jsonl(original, session_id="r").redacted == 1
    assert store.append_keyed("r", turns, ["k1", "k2", "k3"]) == []
    ids = {node.id for node in store.load_session("r").all()}
    exported = tmp_path / "r.jsonl"
    store.export_jsonl("r", exported)
    records = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert {record["node"] for record in records if record["type"] == "key"} == ids
    before = {node.id for node in source.load_session("s").all()}
    assert len(ids - before) == 2  # the secret's node and the one after it: new ids


def test_a_claude_code_import_redacts_the_entries_lines_and_keeps_the_others(
    open_store: Callable[..., SessionStore], tmp_path: Path
) -> None:
    from .foreign_lines import claude_code_lines, write_lines

    lines = claude_code_lines("cc", 2)
    lines[2] = lines[2].replace(b"about zebras", f"about zebras, key {_KEY}".encode())
    source = write_lines(tmp_path / "cc.jsonl", lines)
    store = open_store(redact=secrets())
    report = store.import_claude_code(source)
    assert report.redacted == 1
    out = tmp_path / "out.jsonl"
    store.export_jsonl("cc", out)
    expected = source.read_bytes().replace(_KEY.encode(), b"[REDACTED:openai-key]")
    assert out.read_bytes() == expected
    assert "[REDACTED:openai-key]" in store.load_path("cc")[2].json_text()
    # A redactor that cannot read lines refuses such a file, writing nothing.
    own = open_store(redact=lambda turn: REDACT(turn))
    other = write_lines(tmp_path / "other.jsonl", lines)
    with pytest.raises(JsonlError, match=r"other.jsonl:3: .*reads whole lines"):
        own.import_claude_code(other)
    assert own.list_sessions() == ["cc"]


def test_the_quick_check_sees_through_json_escapes_and_knows_every_pattern() -> None:
    from memstore import redact

    # A turn whose JSON text hides a secret's fixed characters behind escapes is still read.
    hidden = Turn.from_json_text(
        '{"role":"user","blocks":[{"kind":"text","text":"\\u0073k-proj-'
        + "a1B2" * 8
        + ' and https:\\/\\/me:hunter2@db"}]}'
    )
    assert REDACT(hidden).to_json()["blocks"][0]["text"] == (
        "[REDACTED:openai-key] and https://me:[REDACTED:url-password]@db"
    )
    # Every pattern has its clues, each of which the one quick scan finds.
    assert list(redact._CLUES) == list(redact.PATTERNS)
    for clues in redact._CLUES.values():
        assert all(redact._ANY_CLUE.search(clue) for clue in clues)
    assert REDACT.may_change('{"text":"Authorization: BEARER abc"}')
    assert not REDACT.may_change('{"text":"sk_ AKI ghp eyj :/ bear er"}')


def test_append_node_refuses_a_node_whose_turn_the_redactor_changes(
    open_store: Callable[..., SessionStore],
) -> None:
    from memstore import SessionGraph

    graph = SessionGraph("s", clock=lambda: 7)
    secret = graph.append(_SECRET_TURN)
    store = open_store(redact=secrets())
    # Its id addresses the turn as given: stored redacted, it would be a wrong content address.
    with pytest.raises(InvalidArgumentError, match=rf"node '{secret.id}'.*redactor changes"):
        store.append_node("s", secret)
    assert store.head("s") is None
    assert store.load_session("s").all() == []
    # A node the redactor leaves as it is goes in as usual.
    clean = SessionGraph("c", clock=lambda: 7).append(_plain("hello"))
    store.append_node("c", clean)
    assert store.head("c") == clean.id
    # A node the session holds already (written before the store redacted) only moves the head.
    open_store().append_node("s", secret)
    store.append("s", _plain("next"))
    store.append_node("s", secret)
    assert store.head("s") == secret.id


def test_compaction_summaries_go_through_the_redactor(
    open_store: Callable[..., SessionStore],
) -> None:
    from memstore import SUMMARY_HEADING, CompactionPolicy, ModelCard
    from memstore.invokers import extractive

    plain = open_store()  # the turns were stored before the store redacted
    for n in range(12):
        text = f"turn {n}: key {_KEY} " + "words " * 100
        plain.append(
            "s", {"role": ("user", "assistant")[n % 2], "blocks": [_plain(text)["blocks"][0]]}
        )
    seen: list[Turn] = []

    def recording(turn: Turn) -> Turn:
        seen.append(turn)
        return REDACT(turn)

    store = open_store(redact=recording)
    card = ModelCard(id="summarizer", context_window=4000, max_output_tokens=500)
    result = store.compact_session("s", card, extractive(), CompactionPolicy(keep_recent=2))
    summary = store.load_path_nodes("s")[0]
    assert result.summary_node_id == summary.id
    assert [turn.to_json()["blocks"][0]["text"].split("\n")[0] for turn in seen] == [
        SUMMARY_HEADING
    ]
    text = summary.turn.json_text()
    assert "key [REDACTED:openai-key]" in text  # the extractive summary quoted the turns
    assert _KEY not in text
    assert summary.id == hash_node(None, summary.turn, summary.created_at)


def test_a_file_imported_through_the_redactor_imports_again_adding_only_what_it_gained(
    open_store: Callable[..., SessionStore], tmp_path: Path
) -> None:
    turns = [_plain("hello"), _SECRET_TURN, _plain("after")]
    source = open_store()
    source.append_many("s", turns, created_at=100)
    original = tmp_path / "s.jsonl"
    source.export_jsonl("s", original)
    store = open_store(redact=secrets())
    assert store.import_jsonl(original, session_id="r").redacted == 1
    # Its lines are stored redacted, under new ids: the file is still recognised as imported.
    again = store.import_jsonl(original, session_id="r")
    assert (again.files[0].unchanged, again.records, again.redacted) == (True, 0, 0)
    # Grown: only the new lines are added, chained under the redacted nodes' ids.
    source.append_many("s", [_plain(f"key {_KEY}"), _plain("end")], created_at=200)
    source.export_jsonl("s", original)
    grown = store.import_jsonl(original, session_id="r")
    assert (grown.records, grown.nodes, grown.redacted) == (4, 2, 1)
    reference = open_store()
    reference.append_many("ref", [REDACT(parse_turn(turn)) for turn in turns], created_at=100)
    reference.append_many(
        "ref", [_plain("key [REDACTED:openai-key]"), _plain("end")], created_at=200
    )
    _same_session(store, reference, tmp_path)
    # A file whose imported part changed is refused at that line, and nothing is written.
    changed = tmp_path / "changed.jsonl"
    changed.write_bytes(original.read_bytes().replace(b'"hello"', b'"hallo"'))
    before = store.load_session("r").all()
    with pytest.raises(JsonlError, match=r"changed.jsonl:1: .*differs from what was imported"):
        store.import_jsonl(changed, session_id="r")
    assert store.load_session("r").all() == before
    # Imported without the redactor, the file's lines are not what the store holds.
    with pytest.raises(JsonlError, match=r"s.jsonl:3: this line differs"):
        open_store().import_jsonl(original, session_id="r")


@pytest.mark.parametrize("agent", ["claude-code", "pi"])
def test_an_agent_file_imported_through_the_redactor_imports_again(
    open_store: Callable[..., SessionStore], tmp_path: Path, agent: str
) -> None:
    from .foreign_lines import claude_code_lines, pi_lines, write_lines

    def lines(exchanges: int) -> list[bytes]:
        found = (claude_code_lines if agent == "claude-code" else pi_lines)("a", exchanges)
        first = 0 if agent == "claude-code" else 1  # pi's first line is its header
        found[first] = found[first].replace(b"about zebras", f"key {_KEY}".encode())
        return found

    path = write_lines(tmp_path / "a.jsonl", lines(2))
    store = open_store(redact=secrets())
    assert store.import_foreign(path, agent=agent).redacted == 1
    again = store.import_foreign(path, agent=agent)
    assert (again.files[0].unchanged, again.redacted) == (True, 0)
    write_lines(path, lines(3))
    grown = store.import_foreign(path, agent=agent)
    assert (grown.records, grown.redacted) == (len(lines(3)) - len(lines(2)), 0)
    session = grown.files[0].session_id
    out = tmp_path / "out.jsonl"
    store.export_jsonl(session, out)
    assert out.read_bytes() == path.read_bytes().replace(_KEY.encode(), b"[REDACTED:openai-key]")


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=turns())
def test_a_redacting_store_keeps_no_secret_of_a_generated_corpus_and_nothing_else_changes(
    database_url: str, tmp_path: Path, case: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    """On SQLite and PostgreSQL: the plain store is another tenant of the same database."""
    original, expected = case
    clean = parse_turn(expected)
    name = f"s{uuid.uuid4().hex}"  # each example a session of its own
    with (
        SessionStore(database_url, tenant="plain") as plain,
        SessionStore(database_url, redact=secrets()) as store,
    ):
        # Appended: the stored turn is the expected one, under its content address.
        node = store.append(name, original, created_at=9)
        assert node.turn.json_text() == clean.json_text()
        assert node.id == hash_node(None, clean, 9)
        # Imported from a file that holds the secrets: the same node, counted once.
        plain.append(name, original, created_at=9)
        path = tmp_path / f"{name}.jsonl"
        plain.export_jsonl(name, path)
        report = store.import_jsonl(path, session_id=f"{name}-imported")
        assert report.redacted == int(original != expected)
        assert store.load_path_nodes(f"{name}-imported") == [node]
