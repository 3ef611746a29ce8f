"""Several processes writing one database: no lost appends, no silent forks, no lock errors."""

from __future__ import annotations

import multiprocessing

from memstore import HeadMovedError, SessionStore

WORKERS = 4
APPENDS = 25


def _say(worker: int, n: int) -> dict[str, object]:
    return {"role": "user", "blocks": [{"kind": "text", "text": f"worker {worker} turn {n}"}]}


def _worker(url: str, worker: int) -> int:
    """Append to a private session, and to a shared one with compare-and-set retries."""
    store = SessionStore(url)
    retries = 0
    private = store.session(f"private-{worker}")
    shared = store.session("shared")
    for n in range(APPENDS):
        private.append(_say(worker, n))
        while True:
            try:
                shared.append(_say(worker, n))
                break
            except HeadMovedError:
                retries += 1
                shared.refresh()
    store.close()
    return retries


def test_concurrent_writers_lose_nothing_and_never_fork(database_url: str) -> None:
    SessionStore(database_url).close()  # migrate once, up front
    context = multiprocessing.get_context("spawn")
    with context.Pool(WORKERS) as pool:
        pool.starmap(_worker, [(database_url, worker) for worker in range(WORKERS)])
    store = SessionStore(database_url)
    try:
        for worker in range(WORKERS):
            assert len(store.load_path(f"private-{worker}")) == APPENDS
        shared = store.load_session("shared")
        assert shared.size == WORKERS * APPENDS
        # Compare-and-set kept the shared session one linear chain: every append is on the path.
        assert len(store.load_path("shared")) == WORKERS * APPENDS
    finally:
        store.close()
