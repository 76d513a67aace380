"""Sans-IO framing of RemotingCommands (Netty's NettyEncoder / NettyDecoder, no sockets).

Frame layout (all integers big-endian)::

    0         4                         8                  8+hlen            4+length
    +---------+-------------------------+------------------+------------------+
    | length  | ser_type | header_len   | header           | body             |
    | int32   | uint8    | uint24       | JSON or ROCKETMQ | opaque bytes     |
    +---------+-------------------------+------------------+------------------+
    length = 4 + header_len + len(body)        (the length word does not count itself)
    ser_type: 0 = JSON (UTF-8), 1 = ROCKETMQ binary (below)

JSON header (what Java's fastjson writes; keys sorted, no spaces)::

    {"code":0,"extFields":{"k":"v"},"flag":1,"language":"JAVA","opaque":7,
     "remark":"…","serializeTypeCurrentRPC":"JSON","version":409}

ROCKETMQ binary header (Java ``RocketMQSerializable``)::

    +--------+----------+---------+--------+-------+-----------+--------+--------+---------+
    | code   | language | version | opaque | flag  | remarkLen | remark | extLen | ext map |
    | int16  | int8     | int16   | int32  | int32 | int32     | UTF-8  | int32  |         |
    +--------+----------+---------+--------+-------+-----------+--------+--------+---------+
    ext map = ( keyLen int16 | key UTF-8 | valLen int32 | val UTF-8 )*   totalling extLen bytes
    a zero length means null (remark absent)

Replies always carry an ``extFields`` object whose values are all strings: the C++ client
reads reply fields only when they are JSON strings and dereferences the header without a
NULL check when ``extFields`` is missing (C++ RemotingCommand::Decode).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from rmq.common import native
from rmq.errors import RemotingCommandError
from rmq.protocol.codes import LanguageCode
from rmq.protocol.command import BodyPart, RemotingCommand

__all__ = [
    "FrameDecoder",
    "encode",
    "encode_header",
    "decode_frame",
    "decode_json_header",
    "decode_binary_header",
    "DEFAULT_MAX_FRAME_LENGTH",
    "FrameHook",
    "json_header_decoder",
]

# Java NettySystemConfig.COM_ROCKETMQ_REMOTING_FRAME_MAX_LENGTH default (16 MiB): a pull
# reply is at most a few hundred KiB, a send at most 4 MiB of body.
DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024
_MAX_HEADER_LENGTH = 0xFFFFFF  # 24 bits in the length word

_LENGTHS = struct.Struct(">ii")  # length, ser_type<<24 | header_len
_BIN_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remarkLen
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

_LANG_BY_BYTE = {lc.value: lc.name for lc in LanguageCode}
_BYTE_BY_LANG = {lc.name: lc.value for lc in LanguageCode}
# The language name of each unsigned header byte (the field is a signed int8).
_LANG_BY_UBYTE = tuple(_LANG_BY_BYTE.get(b - 256 if b > 127 else b, "OTHER") for b in range(256))
_LANG_OTHER = int(LanguageCode.OTHER)


def _unserializable(o: Any) -> Any:
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


# The C encoder and scanner behind json.dumps / json.loads, built once: json.dumps builds a
# new C encoder on every call, and json.loads detects the encoding and strips whitespace
# with a regex first. On the request path that is a third of the header cost.
try:
    # json.encoder's c_make_encoder / c_encode_basestring, from the C module that defines them
    from _json import encode_basestring as c_encode_basestring
    from _json import make_encoder as c_make_encoder

    _fast_encoder = c_make_encoder(None, _unserializable, c_encode_basestring, None, ":", ",", False, False, True)

    def _dumps(o: Any) -> str:
        return "".join(_fast_encoder(o, 0))

except ImportError:  # pragma: no cover - CPython always has _json
    _dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode

# The fast header codec. Decoding: a typed msgspec Struct for the shape every client sends
# (the eight RemotingCommand fields, scalar extFields values); anything else (an unknown
# field, a null, a float where an int goes, malformed JSON) fails there and the pure-Python
# reference below runs, which accepts it too or raises the reference error, so error messages
# never depend on the path. Encoding: json_header_encode in rmq/protocol/_codec.pyx (the
# extension rmq.protocol._codec), byte for byte the reference's output. msgspec decoded golden headers in about
# 0.9 us against 1.2 us for the former hand-written Cython parser; for encoding the Cython
# writer (0.5 us) beat orjson (0.7 us) and msgspec (0.9 us): bench/header_codec_bench.py.
# RMQ_NO_EXTENSIONS=1 at run time leaves both out (the reference only: A/B measurements,
# debugging).


class _JsonHeader(msgspec.Struct, forbid_unknown_fields=True):
    """A JSON request header as clients write it (Java ``RemotingCommand`` through fastjson).
    Unknown fields are refused so that nothing unchecked (say deep nesting the reference
    would refuse) is skipped over: such headers go to the reference decoder."""

    code: int
    language: str = "JAVA"
    version: int = 0
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    extFields: dict[str, str | int | bool | float | None] = {}
    serializeTypeCurrentRPC: str | None = None


_struct_decode = msgspec.json.Decoder(_JsonHeader).decode
_new_command = object.__new__


def _msgspec_decode(
    buf: bytes | bytearray | memoryview, start: int, end: int, cmd_cls: type[RemotingCommand]
) -> RemotingCommand | None:
    """Decode the JSON header ``buf[start:end]`` into a new ``cmd_cls``, or None when it is
    outside the common shape or malformed (the reference decoder then answers).

    Raises:
        ValueError: the span lies outside ``buf`` (a caller bug, not bad input).
    """
    if start < 0 or end > len(buf) or start > end:
        raise ValueError(f"header span {start}:{end} outside a buffer of {len(buf)} bytes")
    try:
        # a bytes slice of a header (a few hundred bytes) costs less than a memoryview's setup
        h = _struct_decode(buf if start == 0 and end == len(buf) else buf[start:end])
    except (msgspec.DecodeError, ValueError, RecursionError):  # ValueError: bad UTF-8 in a key
        return None
    cmd: RemotingCommand = _new_command(cmd_cls)
    cmd.code = h.code
    cmd.language = h.language
    cmd.version = h.version
    cmd.opaque = h.opaque
    cmd.flag = h.flag
    cmd.remark = h.remark
    cmd.ext_fields = h.extFields
    cmd.body = None
    cmd.serialize_type = 0
    return cmd


def json_header_decoder() -> Callable[[bytes], Any] | None:
    """The decoder of the common JSON header shape that :class:`FrameDecoder` uses (msgspec;
    ``decode(header) -> obj`` with ``code``, ``language``, ``version``, ``opaque``, ``flag``,
    ``remark`` and ``extFields`` attributes, raising for anything else), for a frame hook
    that reads a request without the command; None with ``RMQ_NO_EXTENSIONS=1``."""
    return None if _fast_decode is None else _struct_decode


# A frame hook: ``hook(data, hstart, hend, end, ser)`` sees a whole frame (``data[hstart:hend]``
# its header, ``data[hend:end]`` its body, ``ser`` its serialize type) before it is decoded, and
# either handles it -- returning the reply frame's bytes, b"" for none -- or returns None.
# (data, hstart, hend, end, ser) -> the reply frame (b"" for none), or the reply's header frame
# and its body as two buffers of one frame (the broker's native pull: the records are not copied
# again), or None to decode the frame as any other
FrameHook = Callable[[bytes | bytearray, int, int, int, int], bytes | tuple[bytes, bytes] | None]

_fast_decode: (
    Callable[[bytes | bytearray | memoryview, int, int, type[RemotingCommand]], RemotingCommand | None] | None
) = None
_fast_encode: Callable[..., bytes | None] | None = None
# The binary twins (rmq/protocol/_codec.pyx): binary_header_decode(buf, start, header_len, cmd_cls,
# lang_names) and binary_header_encode(code, ext, flag, language_byte, opaque, remark,
# version, body_len=-1), each returning None for what the reference below must handle.
_fast_bin_decode: (
    Callable[[BodyPart, int, int, type[RemotingCommand], tuple[str, ...]], RemotingCommand | None] | None
) = None
_fast_bin_encode: Callable[..., bytes | None] | None = None
if native.ENABLED:
    _fast_decode = _msgspec_decode
    try:
        from rmq.protocol._codec import binary_header_decode as _fast_bin_decode
        from rmq.protocol._codec import binary_header_encode as _fast_bin_encode
        from rmq.protocol._codec import json_header_encode as _fast_encode
    except ImportError:  # pragma: no cover - the extension is not built
        pass
native.chose("header codec", _fast_encode is not None)

# An instance attribute typeshed does not declare (the C scanner bound to a default decoder).
_scan_once: Callable[[str, int], tuple[Any, int]] = vars(json.decoder.JSONDecoder())["scan_once"]
_JSON_WS = " \t\n\r"


def _loads(data: bytes | bytearray) -> Any:
    text = data.decode("utf-8")
    try:
        obj, end = _scan_once(text, 0)
    except StopIteration:
        text = text.lstrip(_JSON_WS)
        try:
            obj, end = _scan_once(text, 0)
        except StopIteration as exc:
            raise ValueError(f"expecting a value at char {exc.value}") from None
    if end != len(text) and text[end:].strip(_JSON_WS):
        raise ValueError(f"extra data at char {end}")
    return obj


# ============================================================================ decode


def _as_int(value: Any, name: str) -> int:
    # bool is an int subclass; a JSON true/false here is a wrong type, not 1/0.
    if type(value) is int:
        return value
    raise RemotingCommandError(f"header field {name!r} must be a JSON integer, got {type(value).__name__}")


def decode_json_header(header: bytes | bytearray) -> RemotingCommand:
    """Decode a JSON header (no body) into a command.

    Raises:
        RemotingCommandError: not UTF-8 JSON, not an object, or a field of the wrong type.
    """
    if _fast_decode is not None:
        cmd = _fast_decode(header, 0, len(header), RemotingCommand)
        if cmd is not None:
            return cmd
    return _decode_json_header_py(header)


def _decode_json_header_py(header: bytes | bytearray) -> RemotingCommand:
    """The reference JSON header decoder (``json`` + field checks); the msgspec decoder
    handles the common shape and leaves everything else, and every error, to this."""
    try:
        obj = _loads(header)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError
        raise RemotingCommandError(f"header is not valid JSON: {exc}") from None
    if type(obj) is not dict:
        raise RemotingCommandError(f"header JSON is not an object but {type(obj).__name__}")
    get = obj.get
    code = get("code")
    if code is None:
        raise RemotingCommandError("header has no 'code'")
    code = _as_int(code, "code")
    language = get("language", "JAVA")
    if type(language) is not str:
        if type(language) is int:  # a byte code: be generous
            language = _LANG_BY_BYTE.get(language, "OTHER")
        elif language is None:
            language = "JAVA"
        else:
            raise RemotingCommandError(f"header field 'language' must be a string, got {type(language).__name__}")
    version = get("version")
    version = 0 if version is None else _as_int(version, "version")
    opaque = get("opaque")
    opaque = 0 if opaque is None else _as_int(opaque, "opaque")
    flag = get("flag")
    flag = 0 if flag is None else _as_int(flag, "flag")
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        raise RemotingCommandError(f"header field 'remark' must be a string, got {type(remark).__name__}")
    ext = get("extFields")
    if ext is None:
        ext = {}
    elif type(ext) is not dict:
        raise RemotingCommandError(f"header field 'extFields' must be an object, got {type(ext).__name__}")
    else:
        for k, v in ext.items():
            tv = type(v)
            # Clients send strings, numbers and booleans (fastjson writes a Java header's fields); nested
            # values have no meaning in a RocketMQ header.
            if tv is not str and tv is not int and tv is not bool and tv is not float and v is not None:
                raise RemotingCommandError(f"extFields[{k!r}] must be a string, number or boolean, got {tv.__name__}")
    return RemotingCommand(
        code, language=language, version=version, opaque=opaque, flag=flag, remark=remark, ext_fields=ext
    )


def _read_str(buf: BodyPart, pos: int, end: int, n: int, what: str) -> str | None:
    if n < 0 or pos + n > end:
        raise RemotingCommandError(f"binary header: {what} length {n} runs past the header end")
    if n == 0:
        return None
    try:
        return bytes(buf[pos : pos + n]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemotingCommandError(f"binary header: {what} is not UTF-8: {exc}") from None


def decode_binary_header(buf: BodyPart, start: int, header_len: int) -> RemotingCommand:
    """Decode a ROCKETMQ binary header occupying ``buf[start:start+header_len]``.

    Raises:
        RemotingCommandError: a length field points outside the header, or text is not UTF-8.
    """
    if _fast_bin_decode is not None:
        cmd = _fast_bin_decode(buf, start, header_len, RemotingCommand, _LANG_BY_UBYTE)
        if cmd is not None:
            return cmd
    return _decode_binary_header_py(buf, start, header_len)


def _decode_binary_header_py(buf: BodyPart, start: int, header_len: int) -> RemotingCommand:
    """The reference binary header decoder: the Cython one handles well-formed headers and
    leaves everything else, and every error, to this."""
    end = start + header_len
    if header_len < _BIN_FIXED.size + 4:
        raise RemotingCommandError(f"binary header of {header_len} bytes is shorter than its fixed part (21)")
    # 1 CODE, 2 LANGUAGE, 3 VERSION, 4 OPAQUE, 5 FLAG, 6 REMARK LENGTH
    code, lang, version, opaque, flag, remark_len = _BIN_FIXED.unpack_from(buf, start)
    pos = start + _BIN_FIXED.size
    # 7 REMARK
    remark = _read_str(buf, pos, end, remark_len, "remark")
    pos += remark_len
    # 8 EXT FIELDS LENGTH
    if pos + 4 > end:
        raise RemotingCommandError("binary header: no room for the extFields length")
    (ext_len,) = _I32.unpack_from(buf, pos)
    pos += 4
    if ext_len < 0 or pos + ext_len > end:
        raise RemotingCommandError(f"binary header: extFields length {ext_len} runs past the header end")
    # 9 EXT FIELDS: (int16 keyLen, key, int32 valLen, val)*
    ext: dict[str, Any] = {}
    ext_end = pos + ext_len
    while pos < ext_end:
        if pos + 2 > ext_end:
            raise RemotingCommandError("binary header: truncated extFields key length")
        (klen,) = _I16.unpack_from(buf, pos)
        pos += 2
        key = _read_str(buf, pos, ext_end, klen, "extFields key")
        pos += klen
        if pos + 4 > ext_end:
            raise RemotingCommandError(f"binary header: truncated value length of extFields[{key!r}]")
        (vlen,) = _I32.unpack_from(buf, pos)
        pos += 4
        val = _read_str(buf, pos, ext_end, vlen, f"extFields[{key!r}]")
        pos += vlen
        if key is not None:
            # Java reads a zero-length value as null; an empty string is the useful reading.
            ext[key] = "" if val is None else val
    return RemotingCommand(
        code,
        language=_LANG_BY_BYTE.get(lang, "OTHER"),
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        serialize_type=1,
    )


class FrameDecoder:
    """Incremental frame decoder: ``feed()`` bytes, then take whole commands.

    Handles frames split over several reads and several frames in one read. When the
    buffer is empty and a read brings whole frames, they are parsed straight out of the
    read's ``bytes`` (no copy into the buffer).

    Args:
        max_frame_length: refuse frames whose length word exceeds this (default 16 MiB).

    Example::

        dec = FrameDecoder()
        dec.feed(data)
        for cmd in dec:
            ...

    Errors are raised by ``next_frame()`` as ``RemotingCommandError``; the stream is
    unusable afterwards (the caller closes the connection).

    Attributes:
        frame_hook: a :data:`FrameHook` offered every whole frame by :meth:`next_item` before
            it is decoded (the broker's SEND straight from the frame bytes); None (default)
            decodes every frame.
    """

    __slots__ = ("_data", "_pos", "max_frame_length", "frame_hook")

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self._data: bytes | bytearray = b""
        self._pos = 0
        self.max_frame_length = max_frame_length
        self.frame_hook: FrameHook | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._data) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes."""
        if self._pos >= len(self._data):
            # Nothing pending: keep a reference to the read's bytes rather than copying.
            self._data = data if type(data) is bytes else bytes(data)
            self._pos = 0
            return
        cur = self._data
        if type(cur) is not bytearray:
            # Start accumulating; a bytearray grows amortised, so a 16 MiB frame arriving
            # in 64 KiB reads costs O(n), not O(n²).
            cur = bytearray(memoryview(cur)[self._pos :])
            self._data = cur
            self._pos = 0
        elif self._pos:
            del cur[: self._pos]  # cheap: CPython moves bytearray's start pointer
            self._pos = 0
        cur += data

    def next_frame(self) -> RemotingCommand | None:
        """The next whole command, or None if more bytes are needed (the frame hook is not
        asked).

        Raises:
            RemotingCommandError: length over the maximum or negative, header length beyond
                the frame, unknown serialize type, or a malformed header.
        """
        item = self.next_item(False)
        assert not isinstance(item, (bytes, tuple))
        return item

    def next_item(self, hooked: bool = True) -> RemotingCommand | bytes | tuple[bytes, bytes] | None:
        """Like :meth:`next_frame`, but a whole frame is first offered to :attr:`frame_hook`
        (when ``hooked``): a frame it handles comes back as its reply bytes (b"" for none; or
        the reply in two buffers, see :data:`FrameHook`) and is never decoded (Java
        NettyDecoder hands every frame to RemotingCommand.decode; the hook is the broker's
        shortcut for the plain SEND and the plain PULL).

        Raises:
            RemotingCommandError: as :meth:`next_frame`; a frame with a malformed header
                raises only when the hook declines it.
        """
        data = self._data
        pos = self._pos
        avail = len(data) - pos
        if avail < 4:
            return None
        if avail < 8:
            (length,) = _I32.unpack_from(data, pos)
            self._check_length(length)
            return None
        length, word = _LENGTHS.unpack_from(data, pos)
        self._check_length(length)
        ser = (word >> 24) & 0xFF
        header_len = word & 0xFFFFFF
        if header_len > length - 4:
            raise RemotingCommandError(f"header length {header_len} is beyond the frame (frame length {length})")
        if ser > 1:
            raise RemotingCommandError(f"unknown serialize type {ser} (0 JSON and 1 ROCKETMQ are known)")
        end = pos + 4 + length
        if len(data) < end:
            return None
        hstart = pos + 8
        hend = hstart + header_len
        self._pos = end
        hook = self.frame_hook
        if hook is not None and hooked:
            reply = hook(data, hstart, hend, end, ser)
            if reply is not None:
                return reply
        if ser == 0:
            cmd = None if _fast_decode is None else _fast_decode(data, hstart, hend, RemotingCommand)
            if cmd is None:
                cmd = _decode_json_header_py(data[hstart:hend])
        else:
            cmd = decode_binary_header(data, hstart, header_len)
        if hend < end:
            if type(data) is bytes:
                cmd.body = data[hend:end]
            else:
                cmd.body = bytes(memoryview(data)[hend:end])
        return cmd

    def _check_length(self, length: int) -> None:
        if length < 4:
            if length < 0:
                raise RemotingCommandError(f"negative frame length {length}")
            raise RemotingCommandError(f"frame length {length} is too small to hold a header length")
        if length > self.max_frame_length:
            raise RemotingCommandError(f"frame length {length} is over the maximum {self.max_frame_length}")

    def __iter__(self) -> Iterator[RemotingCommand]:
        while True:
            cmd = self.next_frame()
            if cmd is None:
                return
            yield cmd


def decode_frame(frame: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode exactly one whole frame (starting with its length word).

    Raises:
        RemotingCommandError: malformed, incomplete, or followed by extra bytes.
    """
    dec = FrameDecoder(max_frame_length=max(len(frame), 8))
    dec.feed(bytes(frame))
    cmd = dec.next_frame()
    if cmd is None:
        raise RemotingCommandError(f"incomplete frame ({len(frame)} bytes)")
    if dec.buffered:
        raise RemotingCommandError(f"{dec.buffered} bytes after the frame")
    return cmd


# ============================================================================ encode


def _str_value(v: Any) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)


def _wire_ext(ext: dict[str, Any]) -> dict[str, str]:
    # Every value leaves as a string (Java RemotingCommand.makeCustomHeaderToNet); None means "absent".
    for v in ext.values():
        if type(v) is not str:
            return {k: _str_value(v) for k, v in ext.items() if v is not None}
    return ext


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    if _fast_encode is not None:
        header = _fast_encode(cmd.code, cmd.ext_fields, cmd.flag, cmd.language, cmd.opaque, cmd.remark, cmd.version)
        if header is not None:
            return header
    return _encode_json_header_py(cmd)


def _encode_json_header_py(cmd: RemotingCommand) -> bytes:
    """The reference JSON header encoder; the fast one must write the same bytes."""
    ext = _wire_ext(cmd.ext_fields) if cmd.ext_fields else {}
    lang = cmd.language
    lang_json = f'"{lang}"' if lang in _BYTE_BY_LANG else _dumps(str(lang))
    remark = cmd.remark
    remark_json = "" if remark is None else ',"remark":' + _dumps(remark)
    # Hand-assembled in fastjson's key order: cheaper than dumping a dict, same bytes.
    return (
        f'{{"code":{int(cmd.code)},"extFields":{_dumps(ext) if ext else "{}"},"flag":{int(cmd.flag)},'
        f'"language":{lang_json},"opaque":{int(cmd.opaque)}{remark_json},'
        f'"serializeTypeCurrentRPC":"JSON","version":{int(cmd.version)}}}'
    ).encode()


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    if _fast_bin_encode is not None:
        header = _fast_bin_encode(
            cmd.code,
            cmd.ext_fields,
            cmd.flag,
            _BYTE_BY_LANG.get(cmd.language, _LANG_OTHER),
            cmd.opaque,
            cmd.remark,
            cmd.version,
        )
        if header is not None:
            return header
    return _encode_binary_header_py(cmd)


def _encode_binary_header_py(cmd: RemotingCommand) -> bytes:
    """The reference binary header encoder; the fast one must write the same bytes."""
    out = bytearray()
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    out += _BIN_FIXED.pack(
        int(cmd.code),
        _BYTE_BY_LANG.get(cmd.language, LanguageCode.OTHER),
        int(cmd.version),
        int(cmd.opaque),
        int(cmd.flag),
        len(remark),
    )
    out += remark
    ext_at = len(out)
    out += b"\0\0\0\0"
    if cmd.ext_fields:
        for k, v in _wire_ext(cmd.ext_fields).items():
            kb = k.encode("utf-8")
            vb = v.encode("utf-8")
            out += _I16.pack(len(kb))
            out += kb
            out += _I32.pack(len(vb))
            out += vb
    _I32.pack_into(out, ext_at, len(out) - ext_at - 4)
    return bytes(out)


def encode_header(cmd: RemotingCommand) -> bytes:
    """The serialized header alone (JSON, or ROCKETMQ binary when ``serialize_type`` is 1)."""
    if cmd.serialize_type == 1:
        return _encode_binary_header(cmd)
    if cmd.serialize_type != 0:
        raise RemotingCommandError(f"unknown serialize type {cmd.serialize_type}")
    return _encode_json_header(cmd)


def _body_len(body: Any) -> int:
    """Bytes in a body (None, a buffer or a list of them); -1 for anything else (the
    reference path raises for it)."""
    if body is None:
        return 0
    if type(body) is list:
        return sum(map(len, body))
    if type(body) is memoryview:
        return body.nbytes
    if type(body) is bytes or type(body) is bytearray:
        return len(body)
    return -1


def encode(cmd: RemotingCommand) -> list[BodyPart]:
    """Encode a command as ``[length word + header word + header, *body parts]``.

    The body parts are the command's own buffers (bytes or memoryviews), never copied:
    hand the list to ``transport.writelines``. Memoryviews must be flat byte views
    (format ``B``, as slices of an mmap are), since ``len()`` counts their bytes.

    Raises:
        RemotingCommandError: the header is longer than 16 MiB - 1 (24-bit length).
    """
    body = cmd.body
    if cmd.serialize_type == 0 and _fast_encode is not None:
        # The fast paths write the two length words and the header in one bytes object.
        blen = _body_len(body)
        if blen >= 0:
            head = _fast_encode(
                cmd.code, cmd.ext_fields, cmd.flag, cmd.language, cmd.opaque, cmd.remark, cmd.version, blen
            )
            if head is not None:
                if body is None:
                    return [head]
                if isinstance(body, list):
                    return [head, *body]
                return [head, body]
    elif cmd.serialize_type == 1 and _fast_bin_encode is not None:
        blen = _body_len(body)
        if blen >= 0:
            head = _fast_bin_encode(
                cmd.code,
                cmd.ext_fields,
                cmd.flag,
                _BYTE_BY_LANG.get(cmd.language, _LANG_OTHER),
                cmd.opaque,
                cmd.remark,
                cmd.version,
                blen,
            )
            if head is not None:
                if body is None:
                    return [head]
                if isinstance(body, list):
                    return [head, *body]
                return [head, body]
    header = encode_header(cmd)
    hlen = len(header)
    if hlen > _MAX_HEADER_LENGTH:
        raise RemotingCommandError(f"header of {hlen} bytes does not fit the 24-bit header length")
    if body is None:
        return [_LENGTHS.pack(4 + hlen, (cmd.serialize_type << 24) | hlen) + header]
    if type(body) is list:
        # len() of a byte-format memoryview is its size in bytes (documented requirement).
        blen = sum(map(len, body))
        return [_LENGTHS.pack(4 + hlen + blen, (cmd.serialize_type << 24) | hlen) + header, *body]
    if type(body) is memoryview:
        blen = body.nbytes
    elif type(body) is bytes or type(body) is bytearray:
        blen = len(body)
    else:
        raise RemotingCommandError(
            f"body must be bytes, bytearray, memoryview or a list of them, not {type(body).__name__}"
        )
    return [_LENGTHS.pack(4 + hlen + blen, (cmd.serialize_type << 24) | hlen) + header, body]
