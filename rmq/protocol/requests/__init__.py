"""Request builders and response parsers of the client side of the protocol, as pure functions.

Java keeps this vocabulary in ``MQClientAPIImpl`` (and ``MQAdminImpl``), each method building a
``RemotingCommand`` from a typed ``*RequestHeader``, invoking it and decoding the reply. Here
the two halves without the I/O are separate functions, so the one vocabulary serves every
transport:

* the asyncio SDK (``rmq.client.api.ClientAPI``: build → ``RemotingClient.invoke`` → parse),
* the blocking transport of the Spark connector (``rmq.remoting.blocking``; Spark runs in
  plain Python workers without an event loop),
* the admin CLI and the bench harness.

Builders take plain arguments or a typed header and return a fresh :class:`RemotingCommand`
(new opaque). Every wire name comes from the typed headers of :mod:`rmq.protocol.headers`.

Parsers take the reply and return a typed result. A normal outcome is a value or a status (a
pull that found nothing, a topic without a route → None, a group without a stored offset →
None); any other non-success code raises the :class:`~rmq.errors.BrokerResponseError`
subclass for it (``retriable`` and ``refresh_route`` set by :func:`rmq.errors.for_code`), and a
malformed reply raises :class:`~rmq.errors.RemotingCommandError` (not retriable).

This package lives in ``rmq.protocol`` (not in ``rmq.client``) because the Spark connector and
the bench harness use it without the asyncio SDK; it imports only the protocol layer, the
route types of ``rmq.common`` and the value types of ``rmq.types`` (statuses and results,
which themselves import only ``rmq.common``).

This package holds the helpers every area shares; the builders and parsers live in one module per
area (``rmq.protocol.requests.<area>``: namesrv, topic, message, consumer, client, broker, acl).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from rmq.errors import RemotingCommandError, for_code
from rmq.protocol.body import json_object
from rmq.protocol.codes import ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers import Header

__all__ = [
    "LANGUAGE",
    "body_of",
    "check_success",
    "parse_body",
    "raise_for",
]


#: The LanguageCode our requests declare (Java ``LanguageCode.PYTHON``); brokers answer in
#: JSON whatever it is.
LANGUAGE = "PYTHON"


def _request(
    code: int, header: Header | None = None, body: bytes | memoryview | list[Any] | None = None, *, oneway: bool = False
) -> RemotingCommand:
    cmd = RemotingCommand.request(code, header.to_ext_fields() if header is not None else None, body, oneway=oneway)
    cmd.language = LANGUAGE
    return cmd


def raise_for(resp: RemotingCommand) -> NoReturn:
    """Raise the :class:`~rmq.errors.BrokerResponseError` subclass for ``resp.code``."""
    raise for_code(resp.code)(resp.code, resp.remark)


def check_success(resp: RemotingCommand) -> None:
    """The parser of calls whose only answer is SUCCESS (UPDATE_CONSUMER_OFFSET, UNREGISTER_CLIENT,
    UNLOCK_BATCH_MQ, CONSUMER_SEND_MSG_BACK, admin writes): raise for anything else."""
    if resp.code != ResponseCode.SUCCESS:
        raise_for(resp)


_T = TypeVar("_T")


def parse_body(resp: RemotingCommand, what: str, decode: Callable[[bytes], _T]) -> _T:
    """The one way a SUCCESS answer's body becomes a typed object: any other code raises (see
    :func:`raise_for`), then ``decode(body)`` (``b""`` when there is none); a body ``decode``
    refuses (ValueError, KeyError, TypeError, AttributeError, OverflowError: ``int()`` of a
    JSON number such as ``1e400``) is a :class:`~rmq.errors.RemotingCommandError` naming
    ``what``."""
    check_success(resp)
    try:
        return decode(resp.body_bytes() or b"")
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as e:
        raise RemotingCommandError(f"malformed {what} body: {e}") from None


def _json_body(resp: RemotingCommand, what: str) -> dict[str, Any]:
    """A SUCCESS answer's body that must be a JSON object (:func:`parse_body`)."""
    return parse_body(resp, what, lambda body: json_object(body, what))


def body_of(resp: RemotingCommand) -> bytes:
    """A SUCCESS answer's body (raises the BrokerResponseError of any other code)."""
    check_success(resp)
    return resp.body_bytes() or b""
