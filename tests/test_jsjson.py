"""Tests for memstore.jsjson: JSON byte-exact with JavaScript's JSON.stringify and JSON.parse."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import json
import math
import os
import random
import shutil
import struct
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memstore import jsjson
from memstore.errors import InvalidJsonError
from memstore.jsjson import _encode_exact as exact_dumps
from memstore.jsjson import _loads_exact as exact_loads

VECTORS = Path(__file__).parent / "fixtures" / "vectors" / "stringify.jsonl"
PROPERTY = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def read_stringify_vectors() -> list[Any]:
    """One pytest param per line of the stringify vectors, with a readable id."""
    params = []
    lines = VECTORS.read_text(encoding="utf-8").split("\n")
    for number, line in enumerate(lines, start=1):
        if line:
            record = json.loads(line)
            label = ascii(record["input"])[1:31]
            params.append(pytest.param(record["input"], record["output"], id=f"{number}:{label}"))
    return params


def same(a: object, b: object) -> bool:
    """Equal values of equal types, with -0.0 told apart from 0.0 and NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[key], b[key]) for key in a)
    return a == b


# --- the vectors -------------------------------------------------------------------------------


def test_all_stringify_vectors_are_present() -> None:
    assert len(read_stringify_vectors()) == 403


@pytest.mark.parametrize(("text", "expected"), read_stringify_vectors())
def test_stringify_vector(text: str, expected: str) -> None:
    value = jsjson.loads(text)
    assert jsjson.dumps(value) == expected
    assert jsjson.dumps_bytes(value) == expected.encode()
    assert exact_dumps(value) == expected
    assert exact_dumps(exact_loads(text)) == expected
    if not any("\ud800" <= char <= "\udfff" for char in text):
        assert jsjson.dumps(jsjson.loads(text.encode())) == expected


# --- dumps: key order ---------------------------------------------------------------------------


def test_array_index_keys_come_first_in_ascending_order() -> None:
    value = {"b": 1, "2": 2, "a": 3, "1": 4, "01": 5}
    assert jsjson.dumps(value) == '{"1":4,"2":2,"b":1,"a":3,"01":5}'


def test_largest_array_index_is_4294967294() -> None:
    value = {"a": 0, "4294967295": 1, "4294967294": 2, "10000000000": 3}
    assert jsjson.dumps(value) == '{"4294967294":2,"a":0,"4294967295":1,"10000000000":3}'


@pytest.mark.parametrize(
    "key", ["01", "00", "-0", "-1", "+1", " 1", "1 ", "1.0", "1e3", "0x1", "", "\u0661", "²"]
)
def test_keys_that_are_not_canonical_indices_keep_insertion_order(key: str) -> None:
    value = {"z": 0, key: 1, "5": 2}
    assert jsjson.dumps(value) == f'{{"5":2,"z":0,{json.dumps(key, ensure_ascii=False)}:1}}'


def test_index_keys_sort_numerically_not_as_text() -> None:
    value = {"10": "a", "9": "b", "100": "c", "0": "d"}
    assert jsjson.dumps(value) == '{"0":"d","9":"b","10":"a","100":"c"}'


def test_nested_objects_are_ordered_too() -> None:
    value = {"z": {"2": 1, "1": 2}, "0": [{"b": 1, "0": 2}]}
    assert jsjson.dumps(value) == '{"0":[{"0":2,"b":1}],"z":{"1":2,"2":1}}'


def test_other_keys_keep_insertion_order() -> None:
    keys = ["zeta", "alpha", "__proto__", "constructor", "é", "🔑"]
    value = {key: index for index, key in enumerate(keys)}
    assert jsjson.dumps(value) == "{" + ",".join(f'"{k}":{i}' for i, k in enumerate(keys)) + "}"


# --- dumps: numbers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (0.0, "0"),
        (-0.0, "0"),
        (5.0, "5"),
        (-5.0, "-5"),
        (0.1, "0.1"),
        (0.30000000000000004, "0.30000000000000004"),
        (1e15, "1000000000000000"),
        (1e16, "10000000000000000"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e21, "1e+21"),
        (-1e21, "-1e+21"),
        (1.5e21, "1.5e+21"),
        (1.2345678901234568e29, "1.2345678901234568e+29"),
        (1e-6, "0.000001"),
        (1.5e-6, "0.0000015"),
        (1e-5, "0.00001"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (-1.5e-7, "-1.5e-7"),
        (5e-324, "5e-324"),
        (2.2250738585072014e-308, "2.2250738585072014e-308"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (9007199254740993.0, "9007199254740992"),
        (math.nan, "null"),
        (math.inf, "null"),
        (-math.inf, "null"),
        (9007199254740991, "9007199254740991"),
        (-9007199254740991, "-9007199254740991"),
        (2**53, "9007199254740992"),
        (2**53 + 1, "9007199254740992"),
        (-(2**53 + 1), "-9007199254740992"),
        (2**53 + 3, "9007199254740996"),
        (2**64, "18446744073709552000"),
        (10**21, "1e+21"),
        (123456789012345678901234567890, "1.2345678901234568e+29"),
        (2**1024 - 2**970 - 1, "1.7976931348623157e+308"),
        (2**1024 - 2**970, "null"),
        (10**400, "null"),
        (-(10**400), "null"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
    ],
)
def test_numbers_are_written_as_javascript_does(number: object, expected: str) -> None:
    assert jsjson.dumps(number) == expected
    assert jsjson.dumps([number]) == f"[{expected}]"
    assert jsjson.dumps({"k": number}) == f'{{"k":{expected}}}'
    assert exact_dumps({"k": number}) == f'{{"k":{expected}}}'


def test_bool_is_not_written_as_an_int() -> None:
    assert jsjson.dumps([True, 1, False, 0]) == "[true,1,false,0]"


def test_float_subclass_is_written_as_its_value() -> None:
    class Meters(float):
        def __repr__(self) -> str:
            return "Meters()"

    assert jsjson.dumps({"d": Meters(5.0), "e": Meters(1e-7)}) == '{"d":5,"e":1e-7}'


# --- dumps: strings -----------------------------------------------------------------------------


def test_control_characters_are_escaped_like_javascript() -> None:
    text = "".join(map(chr, range(0x20)))
    expected = (
        '"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r'
        "\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018"
        '\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f"'
    )
    assert jsjson.dumps(text) == expected
    assert exact_dumps(text) == expected


@pytest.mark.parametrize(
    "text", ["\x7f", "\x80", "\u2028", "\u2029", "\ufeff", "\uffff", "é", "漢", "😀", "/", "</>"]
)
def test_other_characters_are_written_literally(text: str) -> None:
    assert jsjson.dumps(text) == f'"{text}"'
    assert jsjson.dumps_bytes(text) == f'"{text}"'.encode()


def test_quote_and_backslash_are_escaped() -> None:
    assert jsjson.dumps('a"b\\c') == '"a\\"b\\\\c"'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\ud800", '"\\ud800"'),
        ("\udfff", '"\\udfff"'),
        ("a\udbffb", '"a\\udbffb"'),
        ("\ude00\ud83d", '"\\ude00\\ud83d"'),
        ("\ud800\ud800", '"\\ud800\\ud800"'),
        ("\ud83d\ude00", '"😀"'),  # two code points, one UTF-16 pair: JavaScript sees 😀
        ("x\ud83d\ude00\ud83d", '"x😀\\ud83d"'),
    ],
)
def test_lone_surrogates_are_escaped_and_pairs_joined(text: str, expected: str) -> None:
    assert jsjson.dumps(text) == expected
    assert jsjson.dumps_bytes(text) == expected.encode()
    assert jsjson.dumps({text: 1}) == f"{{{expected}:1}}"


def test_dumps_bytes_is_utf8_of_dumps() -> None:
    value = {"a": ["é", "😀", "\ud800", 1.5, 10**30, {"2": None}]}
    assert jsjson.dumps_bytes(value) == jsjson.dumps(value).encode("utf-8")


# --- dumps: keys and values JSON cannot carry ---------------------------------------------------


def test_non_string_keys_become_javascript_property_names() -> None:
    value = {"b": 0, 7: "int", 2.5: "float", 1.0: "one", None: "none", False: "bool"}
    assert jsjson.dumps(value) == (
        '{"1":"one","7":"int","b":0,"2.5":"float","null":"none","false":"bool"}'
    )
    assert jsjson.dumps({math.nan: 1, -0.0: 2, 1e21: 3, 2**53 + 1: 4}) == (
        '{"0":2,"NaN":1,"1e+21":3,"9007199254740992":4}'
    )


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({1: "a", "1": "b"}, "same JavaScript property '1'"),
        ({True: "a", "true": "b"}, "same JavaScript property 'true'"),
        ({"\ud83d\ude00": 1, "😀": 2}, "same JavaScript property"),
        ({(1, 2): "a"}, "builtins.tuple"),
        ({b"k": "a"}, "builtins.bytes"),
    ],
)
def test_keys_that_cannot_be_written_are_refused(value: object, words: str) -> None:
    with pytest.raises(InvalidJsonError, match=words.replace("(", r"\(")):
        jsjson.dumps(value)


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        ({1, 2}, "builtins.set"),
        (frozenset(), "builtins.frozenset"),
        (b"bytes", "builtins.bytes"),
        (bytearray(b"x"), "builtins.bytearray"),
        (object(), "builtins.object"),
        (Point(1), "Point"),
        (datetime.datetime(2024, 1, 1), "datetime.datetime"),
        (datetime.date(2024, 1, 1), "datetime.date"),
        (decimal.Decimal("1.5"), "decimal.Decimal"),
        (1 + 2j, "builtins.complex"),
        ({"nested": [1, {"deeper": {3}}]}, "builtins.set"),
    ],
)
def test_values_that_are_not_json_are_refused_naming_the_type(
    value: object, type_name: str
) -> None:
    with pytest.raises(InvalidJsonError, match=f"{type_name} is not a JSON value"):
        jsjson.dumps(value)
    with pytest.raises(InvalidJsonError, match=f"{type_name} is not a JSON value"):
        jsjson.dumps_bytes(value)


def test_circular_references_are_refused() -> None:
    looped: list[object] = [1]
    looped.append({"again": looped})
    with pytest.raises(InvalidJsonError, match="contains itself"):
        jsjson.dumps(looped)


def test_shared_references_that_are_not_circular_are_fine() -> None:
    shared = {"x": 1}
    assert jsjson.dumps([shared, shared, {"y": shared}]) == '[{"x":1},{"x":1},{"y":{"x":1}}]'


class Color(enum.Enum):
    RED = "red"
    PAIR = (1, 2)


class Level(enum.IntEnum):
    HIGH = 3


class Role(enum.StrEnum):
    USER = "user"


def test_enums_uuids_and_subclasses_are_written_as_their_values_on_both_paths() -> None:
    class Text(str):
        pass

    value: dict[Any, Any] = {
        "enum": Color.RED,
        "tuple_enum": Color.PAIR,
        "int_enum": Level.HIGH,
        "str_enum": Role.USER,
        "uuid": uuid.UUID(int=0x1234),
        "text": Text("plain"),
        "ordered": collections.OrderedDict([("b", 1), ("a", 2)]),
        "tuple": (1, "x"),
        Role.USER: 1,
    }
    expected = (
        '{"enum":"red","tuple_enum":[1,2],"int_enum":3,"str_enum":"user",'
        '"uuid":"00000000-0000-0000-0000-000000001234","text":"plain",'
        '"ordered":{"b":1,"a":2},"tuple":[1,"x"],"user":1}'
    )
    assert jsjson.dumps(value) == expected
    assert exact_dumps(value) == expected


def test_ordered_dict_order_is_its_own() -> None:
    ordered = collections.OrderedDict([("a", 1), ("b", 2)])
    ordered.move_to_end("a")
    assert jsjson.dumps(ordered) == '{"b":2,"a":1}'


def test_orjson_fragments_are_inserted_verbatim_on_both_paths() -> None:
    fragment = orjson.Fragment(b'{"raw":true}')
    assert jsjson.dumps([fragment, 1]) == '[{"raw":true},1]'
    assert jsjson.dumps([fragment, 1.5e-7]) == '[{"raw":true},1.5e-7]'


# --- dumps: depth -------------------------------------------------------------------------------


def nested_lists(depth: int) -> list[Any]:
    """A list nested ``depth`` levels deep, built without recursion."""
    root: list[Any] = []
    inner = root
    for _ in range(depth - 1):
        child: list[Any] = []
        inner.append(child)
        inner = child
    return root


@pytest.mark.parametrize("depth", [254, 255, 256, 1000, 20_000])
def test_deep_nesting_is_written(depth: int) -> None:
    assert jsjson.dumps(nested_lists(depth)) == "[" * depth + "]" * depth


def test_deep_objects_are_written_and_read() -> None:
    text = '{"a":' * 3000 + '{"2":1,"1":2}' + "}" * 3000
    expected = '{"a":' * 3000 + '{"1":2,"2":1}' + "}" * 3000
    assert jsjson.dumps(jsjson.loads(text)) == expected


# --- dumps: fast path and exact path ------------------------------------------------------------


TYPICAL_TURN = {
    "role": "assistant",
    "blocks": [
        {"kind": "thinking", "text": "Check the config, then run the tests: 1, 2, 3."},
        {"kind": "text", "text": "Running `pytest -q` [e.g. tests/x.py]; v1.0, e2e, 1e-3."},
        {"kind": "text", "text": "claude-3-5, release-2, x1.0, 2.0"},
        {
            "kind": "tool_call",
            "id": "call_1",
            "name": "bash",
            "input": {"command": "pytest -q", "timeout": 120, "env": {}, "dry": False},
        },
        {"kind": "tool_result", "callId": "call_1", "output": "", "isError": False},
    ],
    "createdAt": 1718000000000,
    "score": 0.75,
    "ratio": -12.125,
}


def assert_fast_path_writes(value: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """`dumps` and `dumps_bytes` write `value` as the exact encoder does, without calling it."""
    expected = exact_dumps(value)

    def refuse(value: object, reuse_orjson: bool = False) -> str:
        raise AssertionError("the exact path was taken")

    monkeypatch.setattr(jsjson, "_encode_exact", refuse)
    assert jsjson.dumps(value) == expected
    assert jsjson.dumps_bytes(value) == expected.encode()


def test_typical_values_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_fast_path_writes(TYPICAL_TURN, monkeypatch)


@pytest.mark.parametrize(
    "value",
    [
        {"a": 5.0},
        [1e16],
        [1e-6],
        {"x": -0.0},
        2.0,
        1e21,
        {"2": 1, "1": 2},
        {"": 1},
        {"text": "x:1.5,"},
        {"text": "[1e5]"},
        {"text": "v1.0,"},
        {"text": "a:e1,x"},
        [0.5, "\ud800"],
        [2**53 + 1, 0.5],
        {"score": 100.0, "runs": [{"t": 1.0, "ok": [1, "x"]}, {"t": 0.5}], "tags": {"a": "b"}},
    ],
)
def test_fast_and_exact_paths_agree(value: object) -> None:
    assert jsjson.dumps(value) == exact_dumps(value)
    assert jsjson.dumps_bytes(value) == exact_dumps(value).encode()


RISKY_LOOKING_TEXT = ["[1.0]", '{"a":1.0}', "[5e-7]", "[1e+21,2]", '{"1":2}', "x.0"]


@pytest.mark.parametrize("text", RISKY_LOOKING_TEXT)
def test_a_string_takes_the_fast_path_whatever_it_holds(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """Numbers and keys are what orjson may write differently; a string's text holds neither,
    even when it reads like them (tool outputs often do)."""
    assert_fast_path_writes(text, monkeypatch)


@given(st.text() | st.sampled_from(RISKY_LOOKING_TEXT) | st.sampled_from(["\ud800", "a\udfff"]))
def test_strings_are_written_as_the_exact_encoder_writes_them(text: str) -> None:
    assert jsjson.dumps(text) == exact_dumps(text)
    assert jsjson.dumps_bytes(text) == exact_dumps(text).encode()


def test_orjson_fast_path_number_formats_match_javascript_where_kept() -> None:
    """Every float orjson writes without an exponent and not integral must be JavaScript's."""
    rnd = random.Random(20240601)
    for _ in range(20_000):
        near = rnd.random() < 0.8  # mostly 1e-7 .. 1e17, where the notations change
        exponent = rnd.randint(1023 - 24, 1023 + 56) if near else rnd.randint(0, 2046)
        bits = (rnd.getrandbits(1) << 63) | (exponent << 52) | rnd.getrandbits(52)
        number = struct.unpack("<d", struct.pack("<Q", bits))[0]
        written = orjson.dumps(number)
        if b"e" in written:  # the exact path must see it: jsjson spots exponents by their sign
            assert written[written.index(b"e") + 1 :][:1] in (b"+", b"-"), written
        elif not written.endswith(b".0"):
            assert written.decode() == exact_dumps(number), number
        assert jsjson.dumps([number]) == exact_dumps([number])


# --- loads --------------------------------------------------------------------------------------


def test_integers_stay_ints_and_other_numbers_are_floats() -> None:
    value = jsjson.loads('{"createdAt":1718000000000,"n":-0,"f":1.0,"e":1e2,"big":1e400}')
    assert same(value, {"createdAt": 1718000000000, "n": 0, "f": 1.0, "e": 100.0, "big": math.inf})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("9007199254740991", 9007199254740991),
        ("9007199254740993", 9007199254740993),
        ("-9223372036854775808", -9223372036854775808),
        ("18446744073709551615", 18446744073709551615),
        ("18446744073709551616", 1.8446744073709552e19),
        ("-9223372036854775809", -9.223372036854776e18),
        ("1" * 400, math.inf),
        ("-" + "9" * 5000, -math.inf),
        ("-0.0", -0.0),
        ("1e-400", 0.0),
    ],
)
def test_large_numbers_are_read_without_crashing(text: str, expected: object) -> None:
    assert same(jsjson.loads(text), expected)
    assert same(exact_loads(text), expected)


def test_5000_digit_integer_writes_null_like_javascript() -> None:
    assert jsjson.dumps(jsjson.loads("[" + "7" * 5000 + "]")) == "[null]"


def test_duplicate_keys_last_value_wins_at_first_position() -> None:
    text = '{"a":1,"b":2,"a":3,"c":{"x":1,"x":{"y":1,"y":2}}}'
    assert list(jsjson.loads(text).items()) == [("a", 3), ("b", 2), ("c", {"x": {"y": 2}})]
    assert jsjson.dumps(exact_loads(text)) == '{"a":3,"b":2,"c":{"x":{"y":2}}}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"\\ud800"', "\ud800"),
        ('"\\uDFFF"', "\udfff"),
        ('"\\ude00\\ud83d"', "\ude00\ud83d"),
        ('"\\ud83d\\ude00"', "😀"),
        ('"\ud83d\\ude00"', "😀"),  # a raw high surrogate and an escaped low one still pair
        ('"\\ud83d\ude00"', "😀"),
        ('"\ud83d\ude00"', "😀"),
        ('{"\ud83d\\ude00":1,"\\ud83d\\ude00":2}', {"😀": 2}),
        ('"\\\\\ud83d\\ude00"', "\\😀"),
        ('"\ud800 raw"', "\ud800 raw"),
    ],
)
def test_surrogates_are_kept_and_pairs_joined(text: str, expected: object) -> None:
    assert jsjson.loads(text) == expected


def test_bytes_input_is_utf8() -> None:
    assert jsjson.loads('{"k":"é😀"}'.encode()) == {"k": "é😀"}


def test_deep_nesting_is_read() -> None:
    depth = 100_000
    value = jsjson.loads("[" * depth + "1" + "]" * depth)
    for _ in range(depth):
        assert isinstance(value, list)
        assert len(value) == 1
        value = value[0]
    assert value == 1


@pytest.mark.parametrize(
    ("text", "words", "char"),
    [
        ("", "expected a value", 0),
        ("   ", "expected a value", 3),
        ("NaN", "NaN is not a JSON value", 0),
        ("[1, -Infinity]", "-Infinity is not a JSON value", 4),
        ('{"a": Infinity}', "Infinity is not a JSON value", 6),
        ("[1,]", "expected a value", 3),
        ('{"a":1,}', "property name", 7),
        ("{'a':1}", "property name", 1),
        ("['a']", "expected a value", 1),
        ("01", "unexpected data after the JSON value", 1),
        ("[01]", "expecting ',' delimiter", 2),
        ("1 2", "unexpected data after the JSON value", 2),
        ("[1]x", "unexpected data after the JSON value", 3),
        ('"\x01"', "invalid control character", 1),
        ('"a\nb"', "invalid control character", 2),
        ("\u00a01", "expected a value", 0),
        ("\x0c1", "expected a value", 0),
        ("\x0b1", "expected a value", 0),
        ("\u20281", "expected a value", 0),
        ('"\\x"', r"invalid \\escape", 1),
        ('"\\u12"', r"invalid \\uXXXX escape", 2),
        ('"\\\'"', r"invalid \\escape", 1),
        ('"abc', "unterminated string", 0),
        ("[1", "expecting ',' delimiter", 2),
        ('{"a" 1}', "expecting ':' delimiter", 5),
        ("tru", "expected a value", 0),
        ("True", "expected a value", 0),
        ("-", "expected a value", 0),
        (".5", "expected a value", 0),
        ("+1", "expected a value", 0),
        ("1.", "unexpected data after the JSON value", 1),
        ("1e", "unexpected data after the JSON value", 1),
        ("0x10", "unexpected data after the JSON value", 1),
        ("\n\n  [1,,2]", "expected a value", 7),
        ("\ufeff1", "byte order mark", 0),
        ("[" * 5000, "expected a value, found the end of the text", 5000),
        ("[" * 3000 + "NaN" + "]" * 3000, "NaN is not a JSON value", 3000),
        ("[" * 3000 + "1,]" + "]" * 2999, "expected a value", 3002),
    ],
)
def test_invalid_text_is_refused_saying_what_and_where(text: str, words: str, char: int) -> None:
    with pytest.raises(InvalidJsonError, match=words) as caught:
        jsjson.loads(text)
    assert f"(char {char})" in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert caught.value.__cause__ is not None


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"\xef\xbb\xbf[1]", "byte order mark"),
        (b"\xff", "not UTF-8 at byte 0"),
        (b'["\xed\xa0\x80"]', "not UTF-8 at byte 2"),
        (b'"\xc3"', "not UTF-8 at byte 1"),
        (b"[1,", "expected a value"),
    ],
)
def test_invalid_bytes_are_refused(data: bytes, words: str) -> None:
    with pytest.raises(InvalidJsonError, match=words) as caught:
        jsjson.loads(data)
    assert caught.value.__cause__ is not None


def test_loads_refuses_other_types() -> None:
    with pytest.raises(TypeError, match="str or bytes"):
        jsjson.loads(123)  # type: ignore[arg-type]


# --- properties ---------------------------------------------------------------------------------

SPECIAL_CHARS = (
    "\x00\x01\x08\t\n\x0b\x0c\r\x1f \"\\/'\x7f\x80\x9f\u00a0\u2028\u2029\ufeff\uffff"
    "\U0001f600\U0010ffff\ud800\udbff\udc00\udfff\ud83d\ude00:,[]{}.e0123456789-+"
)
EDGE_FLOATS = [0.0, -0.0, 5e-324, 1e21, 1e-7, 1e-6, 1e-5, 1e16, 1e15, 0.1, 1.5e-7, 2.5, math.nan]
EDGE_FLOATS += [
    math.inf,
    -math.inf,
    9.999999999999999e-6,
    9.999999999999999e20,
    1.7976931348623157e308,
]
FLOATS = st.one_of(
    st.floats(),
    st.floats(min_value=1e-8, max_value=1e22),
    st.floats(min_value=-1e-300, max_value=1e-300),
    st.integers(-(2**60), 2**60).map(float),
    st.sampled_from(EDGE_FLOATS),
)
INTEGERS = st.one_of(
    st.integers(-(2**53), 2**53),
    st.integers(-(2**70), 2**70),
    st.integers(-(2**1100), 2**1100),
    st.sampled_from([2**53 - 1, 2**53, 2**53 + 1, 2**64, 2**1024 - 2**970, 2**1024 - 2**970 - 1]),
)
TEXTS = st.text(st.one_of(st.sampled_from(SPECIAL_CHARS), st.characters()), max_size=12)
KEYS = st.one_of(
    TEXTS,
    st.integers(0, 2**33).map(str),
    st.sampled_from(["0", "01", "-0", "4294967294", "4294967295", "1e3", "+1", " 1", "", "a"]),
)
SCALARS = st.one_of(st.none(), st.booleans(), INTEGERS, FLOATS, TEXTS)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(KEYS, children, max_size=5),
    max_leaves=25,
)


def dumps_or_reject(value: object) -> str:
    """``dumps``, discarding the example if two keys are one JavaScript property."""
    try:
        return jsjson.dumps(value)
    except InvalidJsonError:
        pass
    with pytest.raises(InvalidJsonError, match="same JavaScript property"):
        jsjson.dumps(value)
    with pytest.raises(InvalidJsonError, match="same JavaScript property"):
        exact_dumps(value)
    assume(False)
    raise AssertionError("unreachable: assume(False) discards the example")


@PROPERTY
@given(VALUES)
def test_fast_path_matches_exact_path_and_round_trips(value: object) -> None:
    written = dumps_or_reject(value)
    assert written == exact_dumps(value)
    assert jsjson.dumps_bytes(value) == written.encode()
    again = jsjson.loads(written)
    assert jsjson.dumps(again) == written
    assert same(again, exact_loads(written))
    assert jsjson.dumps(jsjson.loads(written.encode())) == written


def render(value: object, rnd: random.Random) -> str:
    """Write a JSON text for ``value`` in one of the many spellings JSON.parse accepts."""

    def space() -> str:
        return rnd.choice(["", "", "", " ", "\t", "\n", "\r\n", "  "])

    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        spellings = [str(value), f"{value}.0", f"{value}e0", f"{value}E+00"]
        return rnd.choice([*spellings, f"{value}0e-1"] if value else spellings)
    if isinstance(value, float):
        if not math.isfinite(value):
            return rnd.choice(["1e400", "-1e400", "null"])
        spellings = [repr(value), f"{value:.25e}", f"{value:.17g}", f"{value:.3e}"]
        text = rnd.choice(spellings)
        return text if "inf" not in text and "n" not in text else repr(value)
    if isinstance(value, str):
        return render_string(value, rnd)
    if isinstance(value, list):
        inner = ",".join(space() + render(item, rnd) + space() for item in value)
        return "[" + (inner or space()) + "]"
    assert isinstance(value, dict)
    members = [(key, render(item, rnd)) for key, item in value.items()]
    if members and rnd.random() < 0.3:  # a duplicate key: the last value wins
        key, _ = rnd.choice(members)
        members.insert(rnd.randint(0, len(members)), (key, render(rnd.random(), rnd)))
    inner = ",".join(
        f"{space()}{render_string(key, rnd)}{space()}:{space()}{item}{space()}"
        for key, item in members
    )
    return "{" + (inner or space()) + "}"


def render_string(text: str, rnd: random.Random) -> str:
    """A string literal with a random choice of escapes for each character."""
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
    short |= {"\t": "\\t", "/": "\\/"}
    out = []
    for char in text:
        code = ord(char)
        escapes = [short[char]] if char in short else []
        if code > 0xFFFF:
            high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
            escapes.append(f"\\u{high:04x}\\u{low:04X}")
        else:
            escapes.append(f"\\u{code:04x}")
            escapes.append(f"\\u{code:04X}")
        must_escape = char in '"\\' or code < 0x20
        out.append(rnd.choice(escapes) if must_escape or rnd.random() < 0.3 else char)
    return '"' + "".join(out) + '"'


MUTATIONS = [",", "]", "}", "[", "{", ":", '"', "\\", "\x00", "\x01", "'", "NaN", "Infinity"]
MUTATIONS += ["\ufeff", "\u00a0", "\x0b", "\x0c", "01", "-", ".", "e", "\\u12", "+", "1", " "]
MUTATIONS += ["true", "nul", "\ud800", "/", "0", "E5", "\\ud800", "\\x"]


def mutate(text: str, rnd: random.Random) -> str:
    """Insert, delete or cut at a random place: often invalid, sometimes still valid."""
    where = rnd.randint(0, len(text))
    choice = rnd.random()
    if choice < 0.5:
        return text[:where] + rnd.choice(MUTATIONS) + text[where:]
    if choice < 0.8:
        return text[:where] + text[where + 1 :]
    return text[:where]


JSON_TEXTS = st.builds(render, VALUES, st.randoms(use_true_random=False))
MAYBE_INVALID_TEXTS = st.one_of(
    JSON_TEXTS, st.builds(mutate, JSON_TEXTS, st.randoms(use_true_random=False))
)


def parse_both_ways(text: str) -> tuple[str, object]:
    """The fast loads and the exact path agree: on the value (types included) or on refusing."""
    try:
        value = jsjson.loads(text)
    except InvalidJsonError:
        with pytest.raises(InvalidJsonError):
            exact_loads(text)
        return "refused", None
    assert same(value, exact_loads(text))
    return "parsed", value


@PROPERTY
@given(MAYBE_INVALID_TEXTS)
def test_fast_and_exact_loads_agree(text: str) -> None:
    outcome, value = parse_both_ways(text)
    if outcome == "parsed":
        assert jsjson.dumps(jsjson.loads(jsjson.dumps(value))) == jsjson.dumps(value)
    if not any("\ud800" <= char <= "\udfff" for char in text):
        encoded = text.encode()
        try:
            from_bytes = jsjson.loads(encoded)
        except InvalidJsonError:
            assert outcome == "refused"
        else:
            assert same(from_bytes, value)


def test_a_large_text_parses_as_its_parts_do() -> None:
    """Past LARGE_TEXT `loads` takes Python's parser first (less memory): same values, same
    refusals, from str and bytes."""
    item = '{"kind":"text","text":"x\\ud83d\\ude00\\ud800","n":12345678901234567890,"f":1.5}'
    count = jsjson.LARGE_TEXT // len(item) + 1
    text = "[" + ",".join([item] * count) + "]"
    assert len(text) > jsjson.LARGE_TEXT
    assert jsjson.loads(text) == jsjson.loads(text.encode()) == [jsjson.loads(item)] * count
    with pytest.raises(InvalidJsonError, match="expecting ',' delimiter"):
        jsjson.loads(text[:-1])


# --- against JavaScript itself ------------------------------------------------------------------

NODE_SCRIPT = r"""
const readline = require("readline");
const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
function build(tagged) {
  const [tag, payload] = tagged;
  if (tag === "z") return null;
  if (tag === "b" || tag === "s") return payload;
  if (tag === "n") return Number(payload);
  if (tag === "a") return payload.map(build);
  const object = {};
  for (const [key, item] of payload) {
    Object.defineProperty(object, String(build(key)), {
      value: build(item), enumerable: true, writable: true, configurable: true,
    });
  }
  return object;
}
lines.on("line", (line) => {
  const [kind, payload] = JSON.parse(line);
  let reply;
  try {
    reply = [true, JSON.stringify(kind === "text" ? JSON.parse(payload) : build(payload))];
  } catch (error) {
    reply = [false, String(error && error.message)];
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
});
"""


class Node:
    """A long-lived node process answering JSON.stringify questions, one line each."""

    def __init__(self, executable: str) -> None:
        self.process = subprocess.Popen(
            [executable, "-e", NODE_SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            encoding="utf-8",
        )

    def ask(self, kind: str, payload: object) -> tuple[bool, str]:
        """Send one question; ensure_ascii keeps lone surrogates intact on the way."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps([kind, payload], ensure_ascii=True) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            assert self.process.stderr is not None
            pytest.fail(f"node stopped answering: {self.process.stderr.read()}")
        ok, answer = json.loads(line)
        return bool(ok), str(answer)

    def stringify_parse(self, text: str) -> str | None:
        """``JSON.stringify(JSON.parse(text))``, or None when JSON.parse throws."""
        ok, answer = self.ask("text", text)
        return answer if ok else None

    def stringify(self, value: object) -> str:
        """``JSON.stringify`` of the JavaScript counterpart of a Python value."""
        ok, answer = self.ask("value", tag(value))
        assert ok, answer
        return answer

    def close(self) -> None:
        """Let node finish and reap it."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def tag(value: object) -> list[Any]:
    """Describe a Python value so that node can build its JavaScript counterpart."""
    if value is None:
        return ["z"]
    if isinstance(value, bool):
        return ["b", value]
    if isinstance(value, int):
        return ["n", str(value)]
    if isinstance(value, float):
        spelled = repr(value).replace("inf", "Infinity").replace("nan", "NaN")
        return ["n", spelled]
    if isinstance(value, str):
        return ["s", value]
    if isinstance(value, list | tuple):
        return ["a", [tag(item) for item in value]]
    assert isinstance(value, dict)
    return ["o", [[tag(key), tag(item)] for key, item in value.items()]]


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    executable = shutil.which("node")
    if executable is None:
        if "CI" in os.environ:
            pytest.fail("node is not on PATH, but CI must run the JavaScript differential tests")
        pytest.skip("node is not on PATH: the JavaScript differential tests need it (CI has it)")
    oracle = Node(executable)
    yield oracle
    oracle.close()


def test_node_agrees_on_the_vectors(node: Node) -> None:
    for param in read_stringify_vectors():
        text, expected = param.values
        assert node.stringify_parse(text) == expected


@pytest.mark.slow
@PROPERTY
@given(MAYBE_INVALID_TEXTS)
def test_loads_then_dumps_matches_node(node: Node, text: str) -> None:
    expected = node.stringify_parse(text)
    if expected is None:
        with pytest.raises(InvalidJsonError):
            jsjson.loads(text)
    else:
        assert jsjson.dumps(jsjson.loads(text)) == expected


@PROPERTY
@given(VALUES)
def test_dumps_matches_node(node: Node, value: object) -> None:
    assert dumps_or_reject(value) == node.stringify(value)


@PROPERTY
@given(st.dictionaries(st.one_of(KEYS, INTEGERS, FLOATS, st.booleans(), st.none()), st.none()))
def test_non_string_keys_match_node(node: Node, value: dict[Any, None]) -> None:
    assert dumps_or_reject(value) == node.stringify(value)


@PROPERTY
@given(
    st.from_regex(r"-?(0|[1-9][0-9]{0,40})(\.[0-9]{1,40})?([eE][-+]?[0-9]{1,4})?", fullmatch=True)
)
def test_number_literals_match_node(node: Node, text: str) -> None:
    assert jsjson.dumps(jsjson.loads(text)) == node.stringify_parse(text)


def test_many_doubles_match_node(node: Node) -> None:
    rnd = random.Random(7)
    numbers = [struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0] for _ in range(1500)]
    numbers += [rnd.uniform(-1e6, 1e6) for _ in range(500)]
    assert jsjson.dumps(numbers) == node.stringify(numbers)
    integers = [rnd.randint(-(2**80), 2**80) for _ in range(500)]
    assert jsjson.dumps(integers) == node.stringify(integers)
