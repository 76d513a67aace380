"""Helpers shared by the broker's request processors."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from rmq.common import fastjson
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.errors import RemotingCommandError
from rmq.protocol.codes import ResponseCode
from rmq.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from rmq.remoting.connection import Connection

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


#: Compact UTF-8 JSON, as Java's fastjson writes it (no spaces).
to_json_bytes = fastjson.dumps


def parse_json_body(cmd: RemotingCommand, what: str) -> Any:
    """Decode a JSON request body; ``RemotingCommandError`` naming ``what`` when it is not JSON."""
    raw = cmd.body_bytes()
    if not raw:
        raise RemotingCommandError(f"{what}: request body is empty")
    try:
        obj = fastjson.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise RemotingCommandError(f"{what}: request body is not valid JSON ({clip(e)})") from None
    # A "\ud800" escape decodes to a lone surrogate, which no reply or table could encode
    # again; escapes of surrogates are rare (pairs for emoji), so only then is the tree walked.
    if _SURROGATE_ESCAPE.search(raw) and _has_lone_surrogate(obj):
        raise RemotingCommandError(f"{what}: request body has text that is not valid Unicode (a lone surrogate)")
    return obj


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def _has_lone_surrogate(obj: Any) -> bool:
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, str):
            if not o.isascii():
                try:
                    o.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
    return False


def bad_request(
    conn: Connection, cmd: RemotingCommand, err: Exception, code: int = ResponseCode.SYSTEM_ERROR
) -> RemotingCommand:
    """The reply to a request we cannot read (bad header or body), with a rate-limited log
    line (one per request code per 10 s); the remark is clipped too."""
    _rlog.warning(
        f"bad-request-{cmd.code}",
        "bad request code=%s from %s: %s",
        cmd.code,
        getattr(conn, "remote_addr", "?"),
        clip(err),
    )
    return cmd.response(code, clip_remark(err), ext_fields={})


def split_host(addr: str) -> tuple[str, int]:
    """``"ip:port"`` → ``("ip", port)``; ``("0.0.0.0", 0)`` when it cannot be parsed."""
    host, _, port = (addr or "").rpartition(":")
    try:
        return host.strip("[]") or "0.0.0.0", int(port)
    except ValueError:
        return "0.0.0.0", 0
