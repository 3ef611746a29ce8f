"""Benchmark memstore.jsjson against the standard library's json on typical agent turns.

Run ``python benchmarks/bench_jsjson.py``. Every row times the same turns with the standard
library and with jsjson in this process (timeit, best of several repeats) and prints
microseconds per turn and the ratio jsjson / json:

- ``dumps``: ``jsjson.dumps(v)`` against ``json.dumps(v, separators=(",", ":"),
  ensure_ascii=False)``; ``dumps_bytes``: ``jsjson.dumps_bytes(v)`` against the same
  ``json.dumps(...)`` followed by ``.encode()``;
- ``loads``: ``jsjson.loads(line.decode())`` against ``json.loads(line.decode())`` (a fresh str
  each time, as read from a file); ``loads(bytes)``: ``jsjson.loads(line)`` on the raw line.

The exit status is 1 when ``jsjson.dumps`` takes more than 1.5 times ``json.dumps`` on any row
of typical turns (all but the exotic-numbers row, which shows the cost of the exact
pure-Python path) or over all of them, so that CI can hold the line.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import random
import sys
import timeit
from collections.abc import Callable
from typing import Any

import orjson

from memstore import jsjson

MAX_DUMPS_RATIO = 1.5
REPEATS = 7
TARGET_SECONDS = 0.04  # per timeit run: enough loops to drown the timer's noise
TURNS_PER_ROW = 20

PROSE = (
    "the test fails because config loader reads path from env and not the file so we need "
    "to patch it then run pytest again check output look at traceback line module function "
    "returns None instead of dict"
)
WORDS = PROSE.split(" ")
NON_ASCII_WORDS = [*WORDS, "é", "über", "naïve", "漢字", "😀", "café", "—", "→"]
COMMANDS = ["ls -la", "pytest -q tests/", "git diff --stat", "cat pyproject.toml", "rg TODO"]


def sentence(rnd: random.Random, size: int, vocabulary: list[str] = WORDS) -> str:
    """Prose of about ``size`` characters, with punctuation and the odd newline."""
    words: list[str] = []
    length = 0
    while length < size:
        word = rnd.choice(vocabulary)
        if rnd.random() < 0.08:
            word += rnd.choice([".", ",", ":", "\n", "\n\n- ", "`", "?"])
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def tool_input(rnd: random.Random, size: int) -> dict[str, Any]:
    """A nested tool-call input: strings, ints, bools, None, lists and dicts."""
    return {
        "command": rnd.choice(COMMANDS),
        "cwd": "/work/project",
        "timeout": rnd.randint(10, 600),
        "background": rnd.random() < 0.2,
        "env": {"CI": "1", "PYTHONHASHSEED": str(rnd.randint(0, 9999))},
        "files": [
            {"path": f"src/module_{index}.py", "line": rnd.randint(1, 900), "text": None}
            for index in range(rnd.randint(1, 4))
        ],
        "patch": sentence(rnd, size),
    }


def build_turn(
    seed: int, kinds: list[str], text_size: int, vocabulary: list[str]
) -> dict[str, Any]:
    """A turn with one block of each kind, its texts about ``text_size`` characters each."""
    rnd = random.Random(seed)
    blocks: list[dict[str, Any]] = []
    call_id = f"toolu_{rnd.getrandbits(64):016x}"
    for kind in kinds:
        if kind in ("text", "thinking"):
            blocks.append({"kind": kind, "text": sentence(rnd, text_size, vocabulary)})
        elif kind == "tool_call":
            arguments = tool_input(rnd, text_size)
            blocks.append({"kind": kind, "id": call_id, "name": "bash", "input": arguments})
        else:
            output = {"stdout": sentence(rnd, text_size, vocabulary), "stderr": "", "exitCode": 1}
            blocks.append({"kind": kind, "callId": call_id, "output": output, "isError": False})
    role = "user" if kinds == ["text"] else "assistant"
    return {"role": role, "blocks": blocks, "createdAt": 1_718_000_000_000 + rnd.randint(0, 10**9)}


def typical_turn(rnd: random.Random, size: int, vocabulary: list[str] = WORDS) -> dict[str, Any]:
    """A turn of about ``size`` bytes of JSON: a short user text, or thinking, text and tools."""
    if size < 500:
        kinds = ["text"]
    elif size < 2_000:
        kinds = ["thinking", "text", "tool_call"]
    else:
        kinds = ["thinking", "text", "tool_call", "tool_result"]
    seed = rnd.getrandbits(32)
    skeleton = len(jsjson.dumps_bytes(build_turn(seed, kinds, 0, vocabulary)))
    return build_turn(seed, kinds, max(10, (size - skeleton) // len(kinds)), vocabulary)


def with_plain_floats(rnd: random.Random, turn: dict[str, Any]) -> dict[str, Any]:
    """A typical turn whose tool input also carries ordinary floats (0.7, 12.25)."""
    turn["blocks"][2]["input"]["temperature"] = round(rnd.uniform(0.01, 0.99), 2)
    turn["blocks"][2]["input"]["scores"] = [rnd.randint(0, 9999) + 0.125 for _ in range(5)]
    return turn


def with_exotic_numbers(rnd: random.Random, turn: dict[str, Any]) -> dict[str, Any]:
    """A turn with what orjson writes unlike JavaScript: the exact pure-Python path."""
    turn["blocks"][2]["input"]["numbers"] = [5.0, 1e21, 1.5e-7, -0.0, 2**60 + 1, rnd.random()]
    turn["blocks"][2]["input"]["byLine"] = {"10": "b", "2": "a"}
    return turn


@dataclasses.dataclass
class Timing:
    """Seconds to handle all turns of a row, by the standard library and by jsjson."""

    json_dumps: float = 0.0
    dumps: float = 0.0
    json_dumps_encoded: float = 0.0
    dumps_bytes: float = 0.0
    json_loads: float = 0.0
    loads: float = 0.0
    loads_bytes: float = 0.0

    def __add__(self, other: Timing) -> Timing:
        """The field-wise sum, for the overall row."""
        pairs = zip(dataclasses.astuple(self), dataclasses.astuple(other), strict=True)
        return Timing(*(mine + theirs for mine, theirs in pairs))


def best_time(function: Callable[[], object]) -> float:
    """Seconds per call of ``function``: the best of several timeit runs."""
    timer = timeit.Timer(function)
    loops, elapsed = timer.autorange()
    loops = max(1, int(loops * TARGET_SECONDS / max(elapsed, 1e-9)))
    return min(timer.repeat(repeat=REPEATS, number=loops)) / loops


def measure(turns: list[Any], same_as_json: bool) -> Timing:
    """Time writing and reading all ``turns`` both ways, after checking the results."""
    lines = [jsjson.dumps_bytes(turn) for turn in turns]
    for turn, line in zip(turns, lines, strict=True):
        assert jsjson.dumps_bytes(jsjson.loads(line)) == line, "not a round trip"
        standard = json.dumps(turn, separators=(",", ":"), ensure_ascii=False)
        assert standard == line.decode() or not same_as_json, "json and JavaScript should agree"

    def json_dumps() -> None:
        for turn in turns:
            json.dumps(turn, separators=(",", ":"), ensure_ascii=False)

    def json_dumps_encoded() -> None:
        for turn in turns:
            json.dumps(turn, separators=(",", ":"), ensure_ascii=False).encode()

    def json_loads() -> None:
        for line in lines:
            json.loads(line.decode())

    def loads() -> None:
        for line in lines:
            jsjson.loads(line.decode())

    def loads_bytes() -> None:
        for line in lines:
            jsjson.loads(line)

    return Timing(
        json_dumps=best_time(json_dumps),
        dumps=best_time(lambda: [jsjson.dumps(turn) for turn in turns]),
        json_dumps_encoded=best_time(json_dumps_encoded),
        dumps_bytes=best_time(lambda: [jsjson.dumps_bytes(turn) for turn in turns]),
        json_loads=best_time(json_loads),
        loads=best_time(loads),
        loads_bytes=best_time(loads_bytes),
    )


HEADER = (
    f"{'case':<36}{'bytes':>6} |{'json.dumps':>11}{'dumps':>9}{'x':>6}{'dumps_bytes':>12}{'x':>6}"
    f" |{'json.loads':>11}{'loads':>9}{'x':>6}{'loads(bytes)':>13}{'x':>6}"
)


def print_row(label: str, turns: list[Any], timing: Timing) -> None:
    """One line of the table: microseconds per turn and the ratios to json."""
    size = sum(len(jsjson.dumps_bytes(turn)) for turn in turns) // len(turns)
    per_turn = 1e6 / len(turns)

    def pair(mine: float, standard: float) -> str:
        return f"{mine * per_turn:>7.2f}us{mine / standard:>5.2f}x"

    print(
        f"{label:<36}{size:>6} |{timing.json_dumps * per_turn:>9.2f}us"
        f"{pair(timing.dumps, timing.json_dumps):>15}"
        f"{pair(timing.dumps_bytes, timing.json_dumps_encoded):>18}"
        f" |{timing.json_loads * per_turn:>9.2f}us"
        f"{pair(timing.loads, timing.json_loads):>15}"
        f"{pair(timing.loads_bytes, timing.json_loads):>19}"
    )


def main() -> int:
    """Print the table; return 1 when a typical row breaks the dumps budget."""
    rnd = random.Random(20240601)
    sizes = [200, 1_000, 5_000, 20_000]
    typical = {size: [typical_turn(rnd, size) for _ in range(TURNS_PER_ROW)] for size in sizes}
    floats = [with_plain_floats(rnd, typical_turn(rnd, 1_000)) for _ in range(TURNS_PER_ROW)]
    exotic = [with_exotic_numbers(rnd, typical_turn(rnd, 1_000)) for _ in range(TURNS_PER_ROW)]
    non_ascii = {
        size: [typical_turn(rnd, size, NON_ASCII_WORDS) for _ in range(TURNS_PER_ROW)]
        for size in (5_000, 20_000)
    }

    print(
        f"jsjson / json on agent turns: Python {platform.python_version()}, "
        f"orjson {orjson.__version__}; microseconds per turn, best of {REPEATS}"
    )
    print(HEADER)
    print("-" * len(HEADER))
    failures: list[str] = []
    overall = Timing()
    for size in sizes:
        timing = measure(typical[size], same_as_json=True)
        overall = overall + timing
        label = f"~{size} B"
        print_row(label, typical[size], timing)
        if timing.dumps / timing.json_dumps > MAX_DUMPS_RATIO:
            failures.append(label)
    for label, turns, same_as_json in [
        ("~1000 B, plain floats (0.7, 12.125)", floats, False),
        ("~5000 B, non-ASCII text", non_ascii[5_000], True),
        ("~20000 B, non-ASCII text", non_ascii[20_000], True),
    ]:
        timing = measure(turns, same_as_json)
        print_row(label, turns, timing)
        if timing.dumps / timing.json_dumps > MAX_DUMPS_RATIO:
            failures.append(label)
    print_row("~1000 B, exotic numbers: exact path", exotic, measure(exotic, False))
    print("-" * len(HEADER))
    print_row("overall (the four ~size rows)", [t for s in sizes for t in typical[s]], overall)
    if overall.dumps / overall.json_dumps > MAX_DUMPS_RATIO:
        failures.append("overall")
    if failures:
        print(f"FAIL: jsjson.dumps takes over {MAX_DUMPS_RATIO}x json.dumps: {', '.join(failures)}")
        return 1
    print(f"OK: jsjson.dumps is within {MAX_DUMPS_RATIO}x json.dumps on every typical row")
    return 0


if __name__ == "__main__":
    sys.exit(main())
