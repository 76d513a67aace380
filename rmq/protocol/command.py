"""RemotingCommand: one request or response on the wire (Java ``RemotingCommand``).

A command is a header (code, language, version, opaque, flag, remark, extFields) plus an
optional body. Requests and responses share the shape; ``flag`` tells them apart:

* bit 0 (``RPC_TYPE``)   set → response
* bit 1 (``RPC_ONEWAY``) set → oneway request, the peer sends no reply

``opaque`` is the request id the response echoes; :meth:`RemotingCommand.request` takes a fresh
one from a process-wide counter (like Java's static ``AtomicInteger requestId``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from rmq.protocol.codes import ResponseCode

if TYPE_CHECKING:  # pragma: no cover
    from rmq.protocol.headers import Header

__all__ = ["RemotingCommand", "Body", "BodyPart", "next_opaque", "FLAG_RESPONSE", "FLAG_ONEWAY", "DEFAULT_VERSION"]

# A body is one buffer or a list of them (sent with writelines, never joined); memoryviews
# are flat byte views (format ``B``), as slices of an mmap are.
BodyPart: TypeAlias = "bytes | bytearray | memoryview"
Body: TypeAlias = "bytes | bytearray | memoryview | list[BodyPart]"

FLAG_RESPONSE = 1  # 1 << RPC_TYPE
FLAG_ONEWAY = 2  # 1 << RPC_ONEWAY

# MQVersion.Version.V4_9_8.ordinal(): what Java 4.9.8 puts in every command it sends.
DEFAULT_VERSION = 409

# Java's opaque is an int that wraps; we keep ours in the positive int32 range so it
# survives both the JSON and the binary (int32) encodings on every client.
_opaque_counter = itertools.count()


def next_opaque() -> int:
    """A fresh request id (process-wide, positive int32, wraps around)."""
    return next(_opaque_counter) & 0x7FFFFFFF


H = TypeVar("H", bound="Header")


class RemotingCommand:
    """One command on the wire.

    Attributes:
        code: request code, or response code when ``is_response``.
        language: ``LanguageCode`` name as sent (default ``"JAVA"``).
        version: sender's version (default 409 = V4_9_8).
        opaque: request id, echoed by the response; may be 0.
        flag: bit 0 response, bit 1 oneway (default 0).
        remark: free text, mostly error descriptions (default None).
        ext_fields: the custom header. Decoded requests hold values as received
            (str, int, bool); encoding writes every value as a string.
        body: None, bytes, a memoryview, or a list of them written back to back
            (zero-copy pull bodies).
        serialize_type: 0 JSON, 1 ROCKETMQ binary. Responses inherit the request's.
    """

    # Decoded requests (rmq/protocol/_codec.pyx, json_header_decode) and responses (response()) are
    # built slot by slot without __init__: a new slot must be set there too (a test checks).
    __slots__ = (
        "code",
        "language",
        "version",
        "opaque",
        "flag",
        "remark",
        "ext_fields",
        "body",
        "serialize_type",
    )

    def __init__(
        self,
        code: int,
        *,
        language: str = "JAVA",
        version: int = DEFAULT_VERSION,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, Any] | None = None,
        body: Body | None = None,
        serialize_type: int = 0,
    ) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = ext_fields if ext_fields is not None else {}
        self.body = body
        self.serialize_type = serialize_type

    # ------------------------------------------------------------------ constructors

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, Any] | Header | None = None,
        body: Body | None = None,
        *,
        oneway: bool = False,
    ) -> RemotingCommand:
        """A new request with a fresh opaque.

        Args:
            code: a ``RequestCode``.
            ext_fields: a dict, or a typed header (converted with ``to_ext_fields()``).
            body: optional body.
            oneway: set the oneway flag (default False).
        """
        if ext_fields is not None and not isinstance(ext_fields, dict):
            ext_fields = ext_fields.to_ext_fields()
        return cls(
            int(code),
            opaque=next_opaque(),
            flag=FLAG_ONEWAY if oneway else 0,
            ext_fields=ext_fields,
            body=body,
        )

    def response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: dict[str, Any] | Header | None = None,
        body: Body | None = None,
    ) -> RemotingCommand:
        """The reply to this request: same opaque and serialize type, flag = response.

        Args:
            code: a ``ResponseCode`` (default SUCCESS).
            remark: optional text (errors).
            ext_fields: a dict or a typed response header.
            body: optional body (bytes, memoryview or a list of them).
        """
        if ext_fields is None:
            ext_fields = {}
        elif type(ext_fields) is not dict and not isinstance(ext_fields, dict):
            ext_fields = ext_fields.to_ext_fields()
        # Built slot by slot: this runs once per reply, and a keyword __init__ call costs more.
        r = _new(RemotingCommand)
        r.code = int(code)
        r.language = "JAVA"
        r.version = DEFAULT_VERSION
        r.opaque = self.opaque
        r.flag = FLAG_RESPONSE
        r.remark = remark
        r.ext_fields = ext_fields
        r.body = body
        r.serialize_type = self.serialize_type
        return r

    # ------------------------------------------------------------------ flags

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def mark_response(self) -> None:
        self.flag |= FLAG_RESPONSE

    def mark_oneway(self) -> None:
        self.flag |= FLAG_ONEWAY

    # ------------------------------------------------------------------ helpers

    def decode_header(self, header_cls: type[H]) -> H:
        """Parse ``ext_fields`` into a typed header; raises ``RemotingCommandError`` naming the field."""
        return header_cls.from_ext_fields(self.ext_fields)

    def body_parts(self) -> list[BodyPart]:
        """The body as a list of buffers (empty when there is no body)."""
        body = self.body
        if body is None:
            return []
        if isinstance(body, list):
            return body
        return [body]

    def body_length(self) -> int:
        """Total body size in bytes."""
        return _parts_nbytes(self.body_parts())

    def body_bytes(self) -> bytes:
        """The body joined into one bytes object (b"" when absent). Copies; for small bodies and tests."""
        body = self.body
        if body is None:
            return b""
        if isinstance(body, bytes):
            return body
        if isinstance(body, list):
            return b"".join(body)
        return bytes(body)

    def __repr__(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        return (
            f"<RemotingCommand {kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"lang={self.language} v={self.version} remark={self.remark!r} "
            f"ext={self.ext_fields!r} body={self.body_length()}B ser={self.serialize_type}>"
        )


_new = object.__new__


def _parts_nbytes(parts: Iterable[BodyPart]) -> int:
    n = 0
    for p in parts:
        n += p.nbytes if type(p) is memoryview else len(p)
    return n
