"""Full-text search latency over 100,000 turns (SQLite FTS5, optionally PostgreSQL).

Builds sessions of varied turns (a vocabulary of a few thousand words, tool calls and results),
imports them, then times single-word, two-word and session-scoped queries. Goals: the median
query on SQLite under 20 ms; with `--postgres URL` (in a fresh schema of that server, dropped at
the end), the median search for a rare word on PostgreSQL under 10 ms. With `--unspaced` the
words are kanji and kana written without spaces, as Japanese is, and the queries are words found
inside that text.

    python benchmarks/bench_search.py [--turns 100000] [--session-turns 500] [--postgres URL]
        [--login NAME [--search-role ROLE]] [--unspaced] [--accented] [--skip-sqlite]

With `--login NAME` the PostgreSQL schema is owned by the login NAME (made if missing: neither a
superuser nor BYPASSRLS, so the row-level security policies bind it, as they bind the
application's login of docs/tenants.md), which migrates, imports and searches; the same searches
then run as the URL's own login too (a superuser's, which no policy binds), for comparison.

With `--accented` a quarter of the words carry an accent (French-like text), which PostgreSQL's
index folds (migration 0020). The report also gives the most common word and rare words (found
in a few turns) apart.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from scratch_schemas import FreshSchemas

from memstore import SessionStore, jsjson
from memstore.hashing import hash_node_text
from memstore.jsonl import head_line, node_line

GOAL_MS = 20.0
POSTGRES_RARE_GOAL_MS = 10.0
SESSION_TURNS = 500
ACCENTED = False


KANJI = [chr(code) for code in range(0x4E00, 0x4E00 + 800)]
KANA = [chr(code) for code in range(0x3041, 0x3094)]
SEPARATOR = " "


def vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(size)]
    if ACCENTED:
        words = [w[:-1] + rng.choice("éèàüôç") if rng.random() < 0.25 else w for w in words]
    return words


def unspaced_vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    """Words of one or two kanji and up to two kana, as Japanese words often are."""
    return [
        "".join(rng.choices(KANJI, k=rng.randint(1, 2)) + rng.choices(KANA, k=rng.randint(0, 2)))
        for _ in range(size)
    ]


def sentence(rng: random.Random, words: list[str], length: int) -> str:
    # A Zipf-like choice: a few words are common, most are rare, as in real text.
    return SEPARATOR.join(
        words[min(int(rng.paretovariate(1.1)) - 1, len(words) - 1)] for _ in range(length)
    )


def turn(rng: random.Random, words: list[str], i: int) -> dict[str, object]:
    if i % 3 == 1:
        return {
            "role": "assistant",
            "blocks": [
                {"kind": "thinking", "text": sentence(rng, words, 25)},
                {
                    "kind": "tool_call",
                    "id": f"c{i}",
                    "name": rng.choice(["grep", "read_file", "bash"]),
                    "input": {"query": sentence(rng, words, 4)},
                },
            ],
        }
    if i % 3 == 2:
        output = sentence(rng, words, 40)
        return {
            "role": "user",
            "blocks": [{"kind": "tool_result", "callId": f"c{i - 1}", "output": output}],
        }
    return {"role": "user", "blocks": [{"kind": "text", "text": sentence(rng, words, 30)}]}


def write_corpus(root: Path, turns: int, rng: random.Random, words: list[str]) -> None:
    for session in range(turns // SESSION_TURNS):
        parent: str | None = None
        with (root / f"s{session:04d}.jsonl").open("w", encoding="utf-8", newline="") as out:
            for i in range(SESSION_TURNS):
                turn_json = jsjson.dumps(turn(rng, words, i))
                created_at = 1_767_225_600_000 + i * 1000
                node_id = hash_node_text(parent, turn_json.encode(), created_at)
                out.write(node_line(node_id, parent, turn_json, created_at) + head_line(node_id))
                parent = node_id


def measure(store: SessionStore, queries: list[tuple[str, str | None]]) -> list[float]:
    store.search(queries[0][0])  # warm the cache once
    timings = []
    hits = 0
    for query, session in queries:
        start = time.perf_counter()
        hits += len(store.search(query, session_id=session, limit=20, timeout=None))
        timings.append((time.perf_counter() - start) * 1000)
    print(f"{hits / len(queries):.1f} hits per query on average (limit 20)")
    return timings


def report(name: str, timings: list[float]) -> float:
    median = statistics.median(timings)
    p95 = statistics.quantiles(timings, n=20)[-1]
    print(f"{name:12} median {median:6.2f} ms   p95 {p95:6.2f} ms   max {max(timings):6.2f} ms")
    return median


def measure_postgres(
    server: str,
    logins: tuple[str | None, str | None],
    root: Path,
    queries: list[tuple[str, str | None]],
    common: list[tuple[str, str | None]],
    rare: list[tuple[str, str | None]],
) -> float:
    """Import the corpus into a fresh schema and time the searches there (as `login` if given,
    then as the server URL's own login, then as `login` again once the search is handed to
    `search_role` if given); the rare words' median of the last login."""
    login, search_role = logins
    with FreshSchemas(server) as schemas:
        own = schemas.login(login) if login else server
        name = schemas.new(owner=login)
        urls = [schemas.store_url(name, own)] + ([schemas.store_url(name)] if login else [])
        with SessionStore(urls[0]) as pg:
            started = time.perf_counter()
            pg.import_jsonl(root / "corpus")
            print(f"PostgreSQL import {time.perf_counter() - started:.1f} s")
        runs = [(url, "") for url in urls]
        if login and search_role:
            runs.append((urls[0], f", the search handed to {search_role}"))
        rare_medians: list[float] = []
        for url, handed in runs:
            if handed:
                schemas.own_role(search_role or "")
                with SessionStore(urls[1], auto_migrate=False) as operator:
                    operator.hand_search_to_role(search_role or "")
            with SessionStore(url, auto_migrate=False) as pg:
                who = (pg.engine.url.username or "the URL's login") + handed
                report(f"PostgreSQL as {who}", measure(pg, queries))
                report("  common", measure(pg, common))
                rare_medians.append(report("  rare", measure(pg, rare)))
    return rare_medians[-1]


def main() -> int:
    global SEPARATOR, SESSION_TURNS, ACCENTED
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--postgres", help="also on this PostgreSQL server (a fresh schema)")
    parser.add_argument("--session-turns", type=int, default=SESSION_TURNS)
    parser.add_argument("--unspaced", action="store_true", help="Japanese-like text, no spaces")
    parser.add_argument("--accented", action="store_true", help="a quarter of the words accented")
    parser.add_argument("--skip-sqlite", action="store_true", help="measure PostgreSQL only")
    parser.add_argument("--login", help="a login the policies bind owns and searches the schema")
    parser.add_argument("--search-role", help="with --login: then hand the search to this role")
    args = parser.parse_args()
    rng = random.Random(7)
    SEPARATOR = "" if args.unspaced else " "
    SESSION_TURNS, ACCENTED = args.session_turns, args.accented
    words = unspaced_vocabulary(rng) if args.unspaced else vocabulary(rng)
    sessions = [f"s{n:04d}" for n in range(args.turns // SESSION_TURNS)]
    # Words that occur (the text is Zipf-distributed over the vocabulary): common and rarer.
    queries: list[tuple[str, str | None]] = [(rng.choice(words[:400]), None) for _ in range(40)]
    queries += [(f"{rng.choice(words[:30])} {rng.choice(words[:400])}", None) for _ in range(40)]
    queries += [(rng.choice(words[:400]), rng.choice(sessions)) for _ in range(40)]
    common: list[tuple[str, str | None]] = [(words[0], None)] * 20
    rare: list[tuple[str, str | None]] = [(rng.choice(words[1000:1200]), None) for _ in range(40)]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "corpus").mkdir()
        write_corpus(root / "corpus", args.turns, rng, words)
        median, rare_median = 0.0, 0.0
        if not args.skip_sqlite:
            store = SessionStore(f"sqlite:///{root / 'search.db'}")
            started = time.perf_counter()
            store.import_jsonl(root / "corpus")
            print(
                f"{args.turns} turns in {len(sessions)} sessions, imported in "
                f"{time.perf_counter() - started:.1f} s"
            )
            median = report("SQLite", measure(store, queries))
            report("  common", measure(store, common))
            report("  rare", measure(store, rare))
            store.close()
        if args.postgres:
            rare_median = measure_postgres(
                args.postgres, (args.login, args.search_role), root, queries, common, rare
            )
    met = median < GOAL_MS
    print(f"goal: SQLite median under {GOAL_MS} ms: {'met' if met else 'MISSED'}")
    if args.postgres:
        met_rare = rare_median < POSTGRES_RARE_GOAL_MS
        print(
            f"goal: PostgreSQL rare-word median under {POSTGRES_RARE_GOAL_MS} ms: "
            f"{'met' if met_rare else 'MISSED'}"
        )
        met = met and met_rare
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
