"""JSON that is byte-exact with JavaScript's ``JSON.stringify`` and ``JSON.parse``.

Ids, hashes and the legacy JSONL files depend on reproducing ``JSON.stringify`` exactly (see the
contract, "Canonical JSON"). ``dumps`` first lets orjson write the value and keeps that output
when it provably equals JavaScript's; anything that could differ (floats that orjson writes
differently, keys that are array indices, lone surrogates, integers beyond 2**53-1, subclasses,
nesting deeper than orjson allows) is written by an exact, iterative pure-Python encoder.

Python values map to JavaScript values as follows:

- ``dict`` is an object, ``list`` and ``tuple`` are arrays, ``str`` a string, ``int`` and ``float``
  numbers (an ``int`` beyond 2**53-1 becomes the nearest double, one beyond the double range
  becomes Infinity, written ``null``), ``bool`` and ``None`` as expected;
- a ``str`` is a sequence of UTF-16 code units: adjacent high and low surrogates form one
  character, lone surrogates stay lone (and are written as ``\\udxxx`` escapes);
- dict keys that are not ``str`` are converted as ``String(key)`` would (``1`` -> ``"1"``,
  ``1.5`` -> ``"1.5"``, ``True`` -> ``"true"``, ``None`` -> ``"null"``); two keys that become
  the same JavaScript property name (``1`` and ``"1"``) are refused rather than silently merged;
- enum members are written as their ``value`` and ``uuid.UUID`` as its string, the way orjson
  writes them; an ``orjson.Fragment`` is inserted verbatim (the caller vouches for it);
- anything else (sets, bytes, datetimes, dataclasses, arbitrary objects) and circular
  references raise ``InvalidJsonError``.

``loads`` parses what ``JSON.parse`` accepts and refuses what it rejects. Integer literals
become ``int`` when they fit in 64 bits (so ``createdAt`` stays an ``int``) and ``float`` beyond
that; every other number is a ``float`` (``1e400`` is ``inf``, written ``null`` again).
"""

from __future__ import annotations

import enum
import json
import math
import re
import uuid
from _json import encode_basestring, scanstring
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from memstore.errors import InvalidJsonError

__all__ = ["dumps", "dumps_bytes", "loads", "loads_each"]

_MAX_SAFE_INTEGER = 2**53 - 1
_MAX_ARRAY_INDEX = 2**32 - 2
# Below this depth the exact encoder lets orjson write the containers it writes exactly;
# deeper, orjson's own depth limit (255) makes every attempt fail.
_ORJSON_DEPTH = 64

# orjson raises, sending the value to the exact path, on what it would write unlike JavaScript
# (integers beyond 2**53-1, subclasses) or write where jsjson refuses (datetimes, dataclasses).
_ORJSON_OPTIONS = (
    orjson.OPT_STRICT_INTEGER
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
# A key made of digits, maybe an array index, which JavaScript writes first.
_DIGIT_KEY = re.compile(rb'"[0-9]+":')
# orjson writes floats exactly as JavaScript does, except integral ones (`5.0`) and those with
# an exponent, which it writes outside [1e-5, 1e16) and always with a sign (`1e+16`, `1e-7`).
_RISKY_FLOAT_ENDINGS = (
    re.compile(rb"\.0[,\]}]"),
    re.compile(rb"e\+[0-9]+(?:[,\]}]|\Z)"),
    re.compile(rb"e-[0-9]+(?:[,\]}]|\Z)"),
)

_DIGITS = frozenset(b"0123456789")

_SURROGATE = re.compile("[\ud800-\udfff]")
# A raw surrogate inside a string literal, not escaped by an odd run of backslashes.
_RAW_SURROGATE = re.compile(r"(?<!\\)((?:\\\\)*)([\ud800-\udfff])")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}
_REWORDED = {
    "Expecting value": "expected a value",
    "Extra data": "unexpected data after the JSON value",
}


def dumps(value: object) -> str:
    """Return ``JSON.stringify(value)``, byte for byte.

    Args:
        value: dict, list, tuple, str, int, float, bool or None, nested at any depth.

    Returns:
        The JSON text, without whitespace, keys ordered as JavaScript orders them.

    Raises:
        InvalidJsonError: a value or key JSON cannot carry (the message names its type), two
            keys that are one JavaScript property, or a container that contains itself.
    """
    plain = _plain_scalar(value)
    if plain is not None:
        return plain
    try:
        written = orjson.dumps(value, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:
        return _encode_exact(value, reuse_orjson=True)
    if _could_differ(value, written):
        return _encode_exact(value, reuse_orjson=True)
    return written.decode()


def _plain_scalar(value: object) -> str | None:
    """The text of the scalars record fields are made of (ids, times, null), without orjson:
    a letters-and-digits string, a safe integer, None; None for anything else."""
    if type(value) is str and value.isalnum():
        return f'"{value}"'
    if type(value) is int and -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
        return str(value)
    if value is None:
        return "null"
    return None


def dumps_bytes(value: object) -> bytes:
    """Return ``JSON.stringify(value)`` as UTF-8: what hashes and files need, and the fastest.

    The bytes are always valid UTF-8, since lone surrogates are written as escapes.

    Raises:
        InvalidJsonError: as ``dumps``.
    """
    plain = _plain_scalar(value)
    if plain is not None:
        return plain.encode()
    try:
        written = orjson.dumps(value, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:
        return _encode_exact(value, reuse_orjson=True).encode()
    if _could_differ(value, written):
        return _encode_exact(value, reuse_orjson=True).encode()
    return written


LARGE_TEXT = 1 << 20
"""Characters (or bytes) from which `loads` takes Python's parser first: orjson builds a
document tree of the whole text before the values, so a turn of a million tiny blocks peaked
at 1.6 times the memory its values take (Python's parser builds them directly, a little more
slowly)."""


def loads(text: str | bytes) -> Any:
    """Parse JSON text as ``JSON.parse`` does; raise InvalidJsonError for what it rejects.

    Args:
        text: the JSON text; ``bytes`` must be UTF-8 without a byte order mark. Pass the
            bytes when you have them (a line read from a binary file): that is fastest.

    Returns:
        The value: dict, list, str, int, float, bool or None.

    Raises:
        InvalidJsonError: the text is not valid JSON (the message says what and where).
        TypeError: ``text`` is neither str nor bytes.
    """
    if isinstance(text, str | bytes) and len(text) > LARGE_TEXT:
        return _loads_exact(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as fast_error:
        # Lone surrogates, depth beyond orjson's limit, infinite numbers and every syntax
        # error take the exact path, which also words the error.
        try:
            return _loads_exact(text)
        except InvalidJsonError as error:
            if error.__cause__ is None:
                raise error from fast_error
            raise


def loads_each(texts: Sequence[str]) -> list[Any]:
    """`loads` of every text (a session's stored turns), in one comprehension over orjson when
    every text is short and valid, as nearly all are; else text by text, as `loads` takes each.

    Raises:
        InvalidJsonError: as ``loads``, for the first text it rejects.
    """
    if not texts or max(map(len, texts)) <= LARGE_TEXT:
        fast = orjson.loads
        try:
            return [fast(text) for text in texts]
        except orjson.JSONDecodeError:
            pass
    return [loads(text) for text in texts]


# --- dumps ------------------------------------------------------------------------------------


def _could_differ(value: object, written: bytes) -> bool:
    """Whether orjson's output `written` for `value` may differ from JavaScript's (false
    positives only cost time). A string's never can: it holds no number and no key, and orjson
    escapes as JavaScript does."""
    if type(value) is str:
        return False
    # Patterns that start with a literal search faster than `bytes.__contains__` does here;
    # a float ending is then confirmed to belong to a number, not to text in a string.
    if _DIGIT_KEY.search(written) is not None or written.endswith(b".0"):
        return True
    for pattern in _RISKY_FLOAT_ENDINGS:
        for match in pattern.finditer(written):
            if _is_number_value(written, match.start()):
                return True
    return False


def _is_number_value(written: bytes, end: int) -> bool:
    """Whether ``written[:end]`` ends with a number's digits that stand as a value."""
    start = max(0, end - 32)  # orjson writes no longer mantissa: if longer, assume a number
    pos = end
    while pos > start and written[pos - 1] in _DIGITS:
        pos -= 1
    if pos == start and start > 0:
        return True
    if pos == end:
        return False
    if written[pos - 1 : pos] == b".":  # the fraction: its integer digits come before it
        point = pos = pos - 1
        while pos > start and written[pos - 1] in _DIGITS:
            pos -= 1
        if pos == start and start > 0:
            return True
        if pos == point:
            return False
    if written[pos - 1 : pos] == b"-":
        pos -= 1
    return pos == 0 or written[pos - 1 : pos] in (b":", b",", b"[")


class _Frame:
    """An object or array being written: its remaining members and how to close it."""

    __slots__ = ("closer", "ident", "members", "started")

    def __init__(self, members: Iterator[tuple[str, object]], closer: str, ident: int) -> None:
        self.members = members
        self.closer = closer
        self.ident = ident
        self.started = False


def _encode_exact(value: object, reuse_orjson: bool = False) -> str:
    """Write ``value`` exactly as JavaScript would, iteratively so that depth is unbounded.

    With ``reuse_orjson``, nested containers whose orjson output is provably JavaScript's are
    written by orjson: one odd float then costs its own container, not the whole value.
    """
    out: list[str] = []
    stack: list[_Frame] = []
    open_containers: set[int] = set()
    item = value
    while True:
        if reuse_orjson and 0 < len(stack) < _ORJSON_DEPTH and _write_with_orjson(item, out):
            frame = None
        else:
            frame = _write(item, out, open_containers)
        if frame is not None:
            stack.append(frame)
        while stack:
            top = stack[-1]
            member = next(top.members, None)
            if member is None:
                out.append(top.closer)
                open_containers.discard(top.ident)
                stack.pop()
                continue
            if top.started:
                out.append(",")
            top.started = True
            prefix, item = member
            out.append(prefix)
            break
        else:
            return "".join(out)


def _write_with_orjson(value: object, out: list[str]) -> bool:
    """Write a non-empty dict or list with orjson if that is exact; whether it was written."""
    if not value or type(value) not in (dict, list):
        return False
    try:
        written = orjson.dumps(value, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:
        return False
    if _could_differ(value, written):
        return False
    out.append(written.decode())
    return True


def _write(value: object, out: list[str], open_containers: set[int]) -> _Frame | None:
    """Write a scalar or an empty container to ``out``; return a frame for a non-empty one."""
    if type(value) is str:
        out.append(_quote(value))
    elif type(value) is int:
        out.append(_int_text(value))
    elif type(value) is float:
        out.append(_float_text(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif type(value) is dict or type(value) is list:
        return _open(value, out, open_containers)
    else:
        return _write_other(value, out, open_containers)
    return None


def _write_other(value: object, out: list[str], open_containers: set[int]) -> _Frame | None:
    """Write what is not exactly a JSON type: enums, subclasses, UUIDs, orjson fragments."""
    while isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, bool):
        out.append(json.dumps(value))
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, int):
        out.append(_int_text(value))
    elif isinstance(value, float):
        out.append(_float_text(float.__float__(value)))
    elif isinstance(value, dict | list | tuple):
        return _open(value, out, open_containers)
    elif isinstance(value, orjson.Fragment):  # opaque: only orjson can read it
        out.append(orjson.dumps(value).decode())
    elif isinstance(value, uuid.UUID):
        out.append(f'"{value}"')
    else:
        raise InvalidJsonError(
            f"a {type(value).__module__}.{type(value).__qualname__} is not a JSON value"
        )
    return None


def _open(
    value: dict[Any, Any] | list[Any] | tuple[Any, ...], out: list[str], open_containers: set[int]
) -> _Frame | None:
    """Write an empty container, or its opening bracket and return its frame."""
    ident = id(value)
    if ident in open_containers:
        raise InvalidJsonError(f"cannot write a {type(value).__name__} that contains itself")
    if isinstance(value, dict):
        members = _object_members(value)
        opener, closer = "{", "}"
    else:
        members = [("", element) for element in value]
        opener, closer = "[", "]"
    if not members:
        out.append(opener + closer)
        return None
    out.append(opener)
    open_containers.add(ident)
    return _Frame(iter(members), closer, ident)


def _int_text(value: int) -> str:
    """An integer as JavaScript writes the double nearest to it (``null`` beyond the range)."""
    if -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
        return int.__repr__(value)
    return _float_text(_int_to_number(value))


def _float_text(number: float) -> str:
    """A double as ``JSON.stringify`` writes it (``null`` for NaN and the infinities)."""
    return _number_text(number) if math.isfinite(number) else "null"


def _object_members(obj: dict[Any, Any]) -> list[tuple[str, object]]:
    """The members as (``"key":`` prefix, value), array-index keys first, as JavaScript has it."""
    names: list[tuple[str, object]] = []
    indices: list[tuple[int, str, object]] = []
    converted = False
    for key, member in obj.items():
        if type(key) is str and (key.isascii() or _SURROGATE.search(key) is None):
            name = key
        else:
            name = _property_name(key)
            converted = True
        if "0" <= name[:1] <= "9" and _is_array_index(name):
            indices.append((int(name), name, member))
        else:
            names.append((name, member))
    if converted:
        _refuse_merged_keys(obj)
    if indices:
        indices.sort(key=lambda entry: entry[0])
        names = [(name, member) for _, name, member in indices] + names
    return [(_quote(name) + ":", member) for name, member in names]


def _refuse_merged_keys(obj: dict[Any, Any]) -> None:
    """Refuse two keys that are one JavaScript property (``1`` and ``"1"``), not merge them."""
    seen: dict[str, object] = {}
    for key in obj:
        name = _property_name(key)
        if name in seen:
            raise InvalidJsonError(
                f"keys {seen[name]!r} and {key!r} are the same JavaScript property {name!r}"
            )
        seen[name] = key


def _property_name(key: object) -> str:
    """The JavaScript property name ``String(key)`` for a dict key, pairs of surrogates joined."""
    while isinstance(key, enum.Enum):
        key = key.value
    if isinstance(key, str):
        return _join_surrogate_pairs(str.__str__(key))
    if key is None or isinstance(key, bool):
        return json.dumps(key)
    if isinstance(key, int):
        return _number_text(_int_to_number(key))
    if isinstance(key, float):
        return _number_text(float.__float__(key))
    raise InvalidJsonError(
        f"a dict key of type {type(key).__module__}.{type(key).__qualname__} is not a JSON key"
    )


def _is_array_index(name: str) -> bool:
    """Whether JavaScript treats the property name as an array index (canonical, < 2**32-1)."""
    return (
        0 < len(name) <= 10
        and name.isascii()
        and name.isdigit()
        and (name == "0" or name[0] != "0")
        and int(name) <= _MAX_ARRAY_INDEX
    )


def _quote(text: str) -> str:
    """A JSON string literal as JavaScript writes it (lone surrogates as lowercase escapes)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return encode_basestring(text)
    return _SURROGATE.sub(_escape_surrogate, encode_basestring(_join_surrogate_pairs(text)))


def _escape_surrogate(match: re.Match[str]) -> str:
    """The escape JavaScript writes for a lone surrogate."""
    return f"\\u{ord(match.group()):04x}"


def _join_surrogate_pairs(text: str) -> str:
    """Join adjacent high and low surrogates into one character, as UTF-16 would see them."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _int_to_number(value: int) -> float:
    """The double JavaScript would hold for an integer (infinite beyond the double range)."""
    try:
        return int.__float__(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _number_text(number: float) -> str:
    """``Number.prototype.toString`` of a double (``NaN``, ``Infinity`` included)."""
    if not math.isfinite(number):
        return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
    if number == 0:
        return "0"
    text = float.__repr__(number)
    if "e" not in text:  # Python writes 1e-4 <= |x| < 1e16 without exponent, as JavaScript does
        return text[:-2] if text.endswith(".0") else text
    sign = "-" if number < 0 else ""
    mantissa, _, exponent = text.lstrip("-").partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)  # digits[:point] is the integer part
    significant = digits.lstrip("0")
    point -= len(digits) - len(significant)
    digits = significant.rstrip("0")
    count = len(digits)
    if count <= point <= 21:
        return sign + digits + "0" * (point - count)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    power = point - 1
    suffix = ("e+" if power >= 0 else "e-") + str(abs(power))
    if count == 1:
        return sign + digits + suffix
    return sign + digits[0] + "." + digits[1:] + suffix


# --- loads ------------------------------------------------------------------------------------


class _NonFiniteLiteralError(ValueError):
    """``NaN``/``Infinity``, which Python's json accepts and ``JSON.parse`` rejects."""


def _parse_int(literal: str) -> int | float:
    """An integer literal as an int within 64 bits (as orjson returns it), else the double."""
    if len(literal) <= 20:
        number = int(literal)
        if -(2**63) <= number < 2**64:
            return number
    return float(literal)  # never int(): Python refuses integers of more than 4300 digits


def _reject_constant(name: str) -> Any:
    """Refuse the non-standard literals that Python's json would accept."""
    raise _NonFiniteLiteralError(name)


_decode = json.JSONDecoder(parse_int=_parse_int, parse_constant=_reject_constant).decode


def _loads_exact(text: str | bytes) -> Any:
    """Parse with Python's json (made to behave as ``JSON.parse``), iteratively if very deep."""
    if isinstance(text, bytes | bytearray | memoryview):
        text = _decode_utf8(bytes(text))
    elif not isinstance(text, str):
        raise TypeError(f"loads() takes str or bytes, not {type(text).__name__}")
    if text.startswith("\ufeff"):
        raise InvalidJsonError(
            "invalid JSON at line 1 column 1 (char 0): a byte order mark (U+FEFF) "
            "is not whitespace to JSON.parse; strip it first"
        )
    value = _parse(text)
    if _SURROGATE.search(text) is not None:
        # Raw surrogates in string literals are UTF-16 code units to JSON.parse: one written
        # raw next to one written as an escape still make a pair. Escaping them all lets the
        # parser join the pairs; the text is valid, so the escaped text is valid too.
        value = _parse(_RAW_SURROGATE.sub(_escape_raw_surrogate, text))
    return value


def _decode_utf8(data: bytes) -> str:
    """Decode UTF-8 the way a JSON file must be: strictly, and without a byte order mark."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise InvalidJsonError(
            "invalid JSON at byte 0: a UTF-8 byte order mark is not allowed; strip it first"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidJsonError(
            f"invalid JSON: not UTF-8 at byte {exc.start} ({exc.reason})"
        ) from exc


def _escape_raw_surrogate(match: re.Match[str]) -> str:
    """Rewrite a raw surrogate as the equivalent ``\\uXXXX`` escape."""
    return match.group(1) + f"\\u{ord(match.group(2)):04x}"


def _parse(text: str) -> Any:
    """Parse valid JSON with the C parser; word every refusal with its position."""
    try:
        return _decode(text)
    except RecursionError:
        return _parse_deep(text)
    except json.JSONDecodeError as exc:
        raise _syntax_error(text, exc.pos, _reword(exc.msg)) from exc
    except _NonFiniteLiteralError as exc:
        try:
            _parse_deep(text)  # finds where the literal is, or an earlier error
        except InvalidJsonError as located:
            raise located from exc
        raise InvalidJsonError(f"invalid JSON: {exc} is not a JSON value") from exc


def _reword(message: str) -> str:
    """Python json's message in the words of this module ("Extra data" says little)."""
    message = _REWORDED.get(message, message)
    message = re.sub(r" (starting )?at$", "", message)
    return message[:1].lower() + message[1:]


def _where(text: str, pos: int) -> str:
    """A position as line, column and character offset."""
    line = text.count("\n", 0, pos) + 1
    column = pos - text.rfind("\n", 0, pos)
    return f"line {line} column {column} (char {pos})"


def _parse_deep(text: str) -> Any:
    """Parse JSON without recursion, so that any depth that fits in memory works."""
    containers: list[Any] = []  # open dicts and lists, innermost last
    keys: list[str] = []  # the pending key of every open dict
    pos = _skip(text, 0)
    while True:
        value, pos, opened = _parse_value_start(text, pos)
        if opened is not None:
            containers.append(opened)
            if isinstance(opened, dict):
                key, pos = _parse_key(text, pos)
                keys.append(key)
            continue
        while True:  # attach the finished value, then close containers or move to the next
            pos = _skip(text, pos)
            if not containers:
                if pos != len(text):
                    raise _syntax_error(text, pos, "unexpected data after the JSON value")
                return value
            top = containers[-1]
            char = text[pos : pos + 1]
            if isinstance(top, dict):
                top[keys.pop()] = value
                if char == ",":
                    key, pos = _parse_key(text, _skip(text, pos + 1))
                    keys.append(key)
                    break
                if char != "}":
                    raise _syntax_error(text, pos, "expected ',' or '}' after an object member")
            else:
                top.append(value)
                if char == ",":
                    pos = _skip(text, pos + 1)
                    break
                if char != "]":
                    raise _syntax_error(text, pos, "expected ',' or ']' after an array element")
            value = containers.pop()
            pos += 1


def _parse_value_start(text: str, pos: int) -> tuple[object, int, Any]:
    """Parse a scalar or an empty container (value, end, None), or open one (None, pos, it)."""
    char = text[pos : pos + 1]
    if char == '"':
        string, end = _parse_string(text, pos)
        return string, end, None
    if char in ("{", "["):
        after = _skip(text, pos + 1)
        closer = "}" if char == "{" else "]"
        empty: Any = {} if char == "{" else []
        if text[after : after + 1] == closer:
            return empty, after + 1, None
        return None, after, empty
    number = _NUMBER.match(text, pos)
    if number is not None:
        literal = number.group()
        is_integer = number.group(1) is None and number.group(2) is None
        return (_parse_int(literal) if is_integer else float(literal)), number.end(), None
    for word, literal_value in _LITERALS.items():
        if text.startswith(word, pos):
            return literal_value, pos + len(word), None
    for word in ("NaN", "Infinity", "-Infinity"):
        if text.startswith(word, pos):
            raise _syntax_error(text, pos, f"{word} is not a JSON value")
    if not char:
        raise _syntax_error(text, pos, "expected a value, found the end of the text")
    raise _syntax_error(text, pos, f"unexpected character {char!r}, expected a value")


def _parse_key(text: str, pos: int) -> tuple[str, int]:
    """Parse an object key and its colon; return the key and where its value starts."""
    if text[pos : pos + 1] != '"':
        raise _syntax_error(text, pos, "expected a property name in double quotes")
    key, pos = _parse_string(text, pos)
    pos = _skip(text, pos)
    if text[pos : pos + 1] != ":":
        raise _syntax_error(text, pos, "expected ':' after a property name")
    return key, _skip(text, pos + 1)


def _parse_string(text: str, pos: int) -> tuple[str, int]:
    """Parse the string literal that starts at ``pos`` (its opening quote)."""
    try:
        value, end = scanstring(text, pos + 1, True)
    except json.JSONDecodeError as exc:
        raise _syntax_error(text, exc.pos, _reword(exc.msg)) from exc
    return value, end


def _skip(text: str, pos: int) -> int:
    """The position after the whitespace at ``pos``."""
    match = _WHITESPACE.match(text, pos)
    return match.end() if match is not None else pos


def _syntax_error(text: str, pos: int, what: str) -> InvalidJsonError:
    """An error that says what is wrong and where."""
    return InvalidJsonError(f"invalid JSON at {_where(text, pos)}: {what}")
