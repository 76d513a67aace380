"""A reader for the JSON dialect Java's fastjson writes for RocketMQ bodies.

fastjson writes a ``Map<K, V>`` with non-string keys as they are: integers unquoted
(``{"brokerAddrs":{0:"addr"}}``) and objects as objects (``TopicStatsTable.offsetTable``,
``ConsumeStats.offsetTable`` keyed by ``MessageQueue``:
``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}}``). Neither is JSON.

:func:`loads` reads both. An integer key becomes its decimal string, an object key the
canonical JSON text of the object (``json.dumps(key, sort_keys=True, separators=(",", ":"))``),
so the result is plain JSON data and a reader turns a key back with :func:`object_key`.
"""
from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_DEPTH", "loads", "object_key"]

#: The deepest nesting accepted: RocketMQ bodies nest a few levels; a peer's body nested
#: thousands deep is refused with ValueError rather than exhausting the stack.
MAX_DEPTH = 64

_decoder = json.JSONDecoder()
_WS = " \t\n\r"


def object_key(key: str) -> Any:
    """The object (or number) a key of :func:`loads`'s result stood for; ValueError if none."""
    return json.loads(key)


def loads(text: str | bytes | bytearray | memoryview) -> Any:
    """Parse fastjson output (standard JSON included); raises ``ValueError`` when it is
    neither (``UnicodeDecodeError`` and ``json.JSONDecodeError`` are ValueErrors)."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    value, end = _value(text, _skip(text, 0), 0)
    end = _skip(text, end)
    if end != len(text):
        raise ValueError(f"extra data at offset {end}")
    return value


def _skip(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in _WS:
        i += 1
    return i


def _value(s: str, i: int, depth: int) -> tuple[Any, int]:
    if i >= len(s):
        raise ValueError("unexpected end of fastjson text")
    c = s[i]
    if c == "{" or c == "[":
        if depth >= MAX_DEPTH:
            raise ValueError(f"fastjson text nested deeper than {MAX_DEPTH} levels")
        return _object(s, i, depth + 1) if c == "{" else _array(s, i, depth + 1)
    try:
        value, end = _decoder.raw_decode(s, i)
    except json.JSONDecodeError as e:
        raise ValueError(f"malformed fastjson text at offset {i}: {e.msg}") from None
    if isinstance(value, (dict, list)):  # raw_decode never starts one here; defensive
        raise ValueError(f"unexpected container at offset {i}")
    return value, end


def _expect(s: str, i: int, ch: str) -> int:
    i = _skip(s, i)
    if i >= len(s) or s[i] != ch:
        raise ValueError(f"expected {ch!r} at offset {i}")
    return i + 1


def _object(s: str, i: int, depth: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    i = _skip(s, i + 1)
    if i < len(s) and s[i] == "}":
        return out, i + 1
    while True:
        i = _skip(s, i)
        if i >= len(s):
            raise ValueError("unexpected end of fastjson text in an object")
        key_value, i = _value(s, i, depth)
        if isinstance(key_value, str):
            key = key_value
        elif isinstance(key_value, (dict, list)):
            key = json.dumps(key_value, sort_keys=True, separators=(",", ":"))
        elif isinstance(key_value, bool) or key_value is None:
            key = json.dumps(key_value)
        else:
            key = str(key_value)
        i = _expect(s, i, ":")
        out[key], i = _value(s, _skip(s, i), depth)
        i = _skip(s, i)
        if i < len(s) and s[i] == ",":
            i += 1
            continue
        return out, _expect(s, i, "}")


def _array(s: str, i: int, depth: int) -> tuple[list[Any], int]:
    out: list[Any] = []
    i = _skip(s, i + 1)
    if i < len(s) and s[i] == "]":
        return out, i + 1
    while True:
        item, i = _value(s, _skip(s, i), depth)
        out.append(item)
        i = _skip(s, i)
        if i < len(s) and s[i] == ",":
            i += 1
            continue
        return out, _expect(s, i, "]")
