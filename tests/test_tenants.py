"""Tenants: two tenants of one database hold sessions of the same ids and the same turns (the
same content addresses), and every operation of one tenant's store sees its own rows only."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memstore import CompactionPolicy, ModelCard, SessionStore
from memstore.errors import InvalidArgumentError, UnknownSessionError
from memstore.invokers import extractive

ACME, GLOBEX = "acme", "globex"


def turn(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "blocks": [{"kind": "text", "text": text}]}


def fill(store: SessionStore) -> None:
    """The same sessions, turns and times in each tenant: the same node ids in each."""
    store.append_many(
        "s1",
        [turn("user", "hello shared words"), turn("assistant", "hi there")],
        created_at=1_000,
    )
    store.update_session("s1", title="first", tags=["kept"], metadata={"team": "red"})
    store.append_keyed(
        "s2", [turn("user", "keyed turn")], ["k1"], usage={"inputTokens": 3, "model": "m"}
    )
    store.fork_session("s1", None, "f1")
    store.append_many("long", [turn("user", f"turn {i} of many") for i in range(12)], created_at=5)


@pytest.fixture
def tenants(open_store: Callable[..., SessionStore]) -> tuple[SessionStore, SessionStore]:
    """Two tenants' stores on one database, each filled alike; then globex's `s1` grows a turn
    and `s2` a title of its own."""
    acme, globex = open_store(tenant=ACME), open_store(tenant=GLOBEX)
    fill(acme)
    fill(globex)
    globex.append("s1", turn("user", "only globex knows zebra"))
    globex.update_session("s2", title="globex title")
    return acme, globex


def texts(store: SessionStore, session_id: str) -> list[str]:
    return [turn.blocks[0].text for turn in store.load_path(session_id)]  # type: ignore[union-attr]


def test_two_tenants_hold_the_same_ids_and_content_addresses(
    tenants: tuple[SessionStore, SessionStore], open_store: Callable[..., SessionStore]
) -> None:
    acme, globex = tenants
    assert acme.list_sessions() == globex.list_sessions() == ["f1", "long", "s1", "s2"]
    shared = acme.load_path_nodes("s1")
    assert [node.id for node in globex.load_path_nodes("s1")][:2] == [node.id for node in shared]
    assert open_store().list_sessions() == []  # the default tenant holds nothing
    assert open_store(tenant="initech").sessions() == []


def test_reads_see_only_their_tenant(tenants: tuple[SessionStore, SessionStore]) -> None:
    acme, globex = tenants
    assert texts(acme, "s1") == ["hello shared words", "hi there"]
    assert texts(globex, "s1")[-1] == "only globex knows zebra"
    assert acme.head("s1") != globex.head("s1")
    assert len(acme.load_session("s1").all()) == 2
    assert acme.session_info("s2").title is None
    assert globex.session_info("s2").title == "globex title"
    assert [info.node_count for info in acme.sessions(tag="kept")] == [2]
    assert [info.node_count for info in globex.sessions(tag="kept")] == [3]
    assert acme.session_page(limit=10).sessions == acme.sessions(limit=10)
    assert acme.session_metadata(["s1"])["s1"].metadata == {"team": "red"}
    assert acme.stats().nodes + 1 == globex.stats().nodes
    assert acme.stats().sessions == globex.stats().sessions == 4
    assert [(row.key, row.nodes) for row in acme.usage_stats("model")] == [("m", 1)]
    assert [row.key for row in acme.usage_stats("session")] == ["f1", "s2"] or [
        row.key for row in acme.usage_stats("session")
    ] == ["s2"]
    short = acme.short_node_ids("s1", [acme.head("s1") or ""])
    assert acme.resolve_node_id("s1", next(iter(short.values()))) == acme.head("s1")
    assert acme.estimate_tokens("s1") < globex.estimate_tokens("s1")


def test_search_finds_only_its_tenant(tenants: tuple[SessionStore, SessionStore]) -> None:
    acme, globex = tenants
    assert acme.search("zebra") == []
    assert [hit.session_id for hit in globex.search("zebra")] == ["s1"]
    assert sorted(hit.session_id for hit in acme.search("shared")) == ["f1", "s1"]
    acme.index_search_backlog()
    assert acme.search("zebra", session_id="s1") == []


def test_writes_stay_in_their_tenant(tenants: tuple[SessionStore, SessionStore]) -> None:
    acme, globex = tenants
    assert acme.delete_session("f1")
    assert "f1" in globex.list_sessions()
    acme.set_expiry_default(timedelta(days=1))
    assert globex.expiry_defaults().store is None
    pruned = globex.prune(tag="kept", dry_run=False)
    assert [session.id for session in pruned.sessions] == ["s1"]
    assert "s1" in acme.list_sessions()
    report = acme.erase(reason="asked", session_id="s2", dry_run=False)
    assert report.sessions == ("s2",)
    assert "s2" in globex.list_sessions()
    assert len(acme.erasures()) == 1
    assert globex.erasures() == []
    acme.record_usage("s1", {"inputTokens": 7, "model": "n"})
    assert [row.key for row in globex.usage_stats("model")] == ["m"]


def test_compaction_and_forks_stay_in_their_tenant(
    tenants: tuple[SessionStore, SessionStore],
) -> None:
    acme, globex = tenants
    card = ModelCard(id="summarizer", context_window=400, max_output_tokens=50)
    result = acme.compact_session("long", card, extractive(), CompactionPolicy(keep_recent=2))
    assert result.changed
    assert len(texts(globex, "long")) == 12
    acme.fork_session("s1", None, "mine")
    assert "mine" not in globex.list_sessions()
    with pytest.raises(UnknownSessionError):
        globex.fork_session("mine", None, "copy")


def test_export_and_import_stay_in_their_tenant(
    tenants: tuple[SessionStore, SessionStore], tmp_path: Path
) -> None:
    acme, globex = tenants
    acme.export_jsonl("s1", tmp_path / "acme.jsonl")
    globex.export_jsonl("s1", tmp_path / "globex.jsonl")
    assert "zebra" not in (tmp_path / "acme.jsonl").read_text()
    assert "zebra" in (tmp_path / "globex.jsonl").read_text()
    report = acme.export_sessions(tmp_path / "all-acme")
    assert len(report.files) == 4
    acme.import_jsonl(tmp_path / "globex.jsonl", session_id="imported")
    assert texts(acme, "imported")[-1] == "only globex knows zebra"
    assert "imported" not in globex.list_sessions()
    lines = [json.loads(line) for line in (tmp_path / "acme.jsonl").read_text().splitlines()]
    assert len(lines) > 2


def test_tenants_lists_every_tenant_whatever_the_stores(
    tenants: tuple[SessionStore, SessionStore], open_store: Callable[..., SessionStore]
) -> None:
    acme, _ = tenants
    acme.delete_session("f1")
    listed = [(totals.tenant, totals.sessions) for totals in acme.tenants()]
    assert listed == [(ACME, 3), (GLOBEX, 4)]
    assert open_store(tenant="initech").tenants() == acme.tenants()


def test_a_tenant_name_is_checked(open_store: Callable[..., SessionStore]) -> None:
    for bad in ("has space", "-lead", "x" * 65, "naïve"):
        with pytest.raises(InvalidArgumentError, match="tenant"):
            open_store(tenant=bad)
    with pytest.raises(InvalidArgumentError, match="tenant is a string"):
        open_store(tenant=3)
    assert open_store(tenant="Acme_1.eu:prod@x").tenant == "Acme_1.eu:prod@x"


def test_a_framework_adapter_keeps_to_its_stores_tenant(database_url: str) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from memstore.integrations.langchain import MemstoreChatMessageHistory

    with (
        SessionStore(database_url, tenant=ACME) as acme,
        SessionStore(database_url, tenant=GLOBEX) as globex,
    ):
        MemstoreChatMessageHistory("chat", acme).add_messages([HumanMessage("acme asks")])
        theirs = MemstoreChatMessageHistory("chat", globex)
        theirs.add_messages([HumanMessage("globex asks"), AIMessage("globex answered")])
        assert [m.content for m in MemstoreChatMessageHistory("chat", acme).messages] == [
            "acme asks"
        ]
        assert [m.content for m in theirs.messages] == ["globex asks", "globex answered"]


def test_erase_and_prune_in_one_tenant_leave_the_others_identical_turns(
    open_store: Callable[..., SessionStore], tmp_path: Path
) -> None:
    """Both tenants hold the same turns under the same node ids (a subject's turn, its fork
    copy, a branch no head reaches, usage): acme's erasure of the subject and of a node, and its
    prune of unreached branches, change nothing of globex's: its paths, search, usage, exports
    byte for byte, and receipts."""
    secret = "QuokkaSecret913"
    stores = {name: open_store(tenant=name) for name in (ACME, GLOBEX)}
    for store in stores.values():
        first, _ = store.append_many(
            "s",
            [turn("user", "hello from bob"), turn("assistant", "hi bob")],
            created_at=1_000,
        )
        store.append("s", turn("user", "an old branch"), parent=first.id, created_at=1_500)
        alice = {**turn("user", f"alice says {secret}"), "user_id": "u-alice"}
        store.append("s", alice, parent=first.id, created_at=2_000)
        store.append("s", turn("assistant", "noted"), created_at=3_000, usage={"inputTokens": 5})
        store.fork_session("s", None, "f")
    acme, globex = stores[ACME], stores[GLOBEX]
    assert acme.load_session("s").all() == globex.load_session("s").all()

    def snapshot() -> dict[str, Any]:
        for session_id in ("s", "f"):
            globex.export_jsonl(session_id, tmp_path / f"globex-{session_id}.jsonl")
        return {
            "nodes": {sid: globex.load_session(sid).all() for sid in ("s", "f")},
            "search": sorted((hit.session_id, hit.node_id) for hit in globex.search(secret)),
            "usage": globex.usage_stats("session"),
            "files": {sid: (tmp_path / f"globex-{sid}.jsonl").read_bytes() for sid in ("s", "f")},
        }

    before = snapshot()
    assert len(before["search"]) == 2
    report = acme.erase(subject=("user_id", "u-alice"), reason="GDPR", dry_run=False)
    assert set(report.nodes) == {"s", "f"}
    assert acme.search(secret) == []
    unreached = acme.prune(unreachable=True, dry_run=False)
    assert [branch.session_id for branch in unreached.branches] == ["s"]
    acme.erase(session_id="f", node_id=acme.head("f") or "", reason="asked", dry_run=False)
    assert acme.usage_stats("session") == []
    assert snapshot() == before
    assert globex.erasures() == []
    assert len(acme.erasures()) == 2
    assert globex.prune(unreachable=True).node_count == 2  # its unreached nodes are still there


def test_a_tenants_search_ranks_among_its_own_backlog(tmp_path: Path) -> None:
    """SQLite's backlog (turns small writes added, not indexed yet) is read for the searching
    tenant only: another tenant's waiting turns neither cost its search nor move its ranks."""
    alone, shared = (f"sqlite:///{tmp_path / name}.db" for name in ("alone", "shared"))
    for url in (alone, shared):
        with SessionStore(url, tenant=ACME) as acme:
            acme.append("s1", turn("user", "apple banana cherry"))
    with SessionStore(shared, tenant=GLOBEX) as globex:
        for i in range(20):
            globex.append(f"g{i}", turn("user", f"apple {i}"))
    ranks = []
    for url in (alone, shared):
        with SessionStore(url, tenant=ACME, read_only=True) as reader:
            (hit,) = reader.search("apple")
            ranks.append(hit.rank)
    assert ranks[0] == ranks[1]
