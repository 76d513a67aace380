"""The plain SEND in one Cython call (``SendFastPath``, rmq/broker/processors/_sendpath.pyx).

The fast path reads the broker through a ``SendGate`` (the topic table, the broker config for
the permission, region and trace switch, the statistics) and writes through the running
store's ``Appender`` (``MessageStore.appender``), which the broker binds to the gate once it
is ready (:func:`bind_store`).

:func:`make_fast_path` builds it for a broker from the SEND header's declaration (wire names,
kinds, ranges), Java's NOT_ALLOWED_SEND topics and the property markers that need
``send_back.before_store``. The SEND processor calls it first and runs its Python path for
whatever it declines: see the .pyx for the list (batches, retry topics, delays,
transactions, new queues, file rolls, SYNC_FLUSH, SYNC_MASTER and SLAVE roles, refusals).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from rmq._store import Appender
from rmq.broker.context import BrokerContext
from rmq.broker.managers.topic_config import TopicConfig
from rmq.broker.processors._sendpath import SendFastPath, SendGate
from rmq.broker.processors.send_back import _MARKS
from rmq.common.constants import MixAll, TopicValidator
from rmq.common.message import MessageConst
from rmq.config import BrokerConfig
from rmq.protocol.headers.message import SendMessageRequestHeader
from rmq.remoting.codec import json_header_decoder

__all__ = ["bind_store", "header_spec", "make_fast_path"]

_KINDS = {str: 0, int: 1, bool: 2}


def header_spec() -> list[tuple[str, str, str, int, bool, int, int]]:
    """``(attribute, V1 wire, V2 wire, kind, required, lo, hi)`` of every SEND header field."""
    hints = typing.get_type_hints(SendMessageRequestHeader)
    v2 = SendMessageRequestHeader.WIRE_NAMES_V2
    out = []
    for f in dataclasses.fields(SendMessageRequestHeader):
        tp: Any = hints[f.name]
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        base = args[0] if args else tp
        lo, hi = f.metadata["range"] if base is int else (0, 0)
        out.append((f.name, f.metadata["wire"], v2[f.name], _KINDS[base], f.default is dataclasses.MISSING, lo, hi))
    return out


def make_fast_path(controller: BrokerContext) -> SendFastPath:
    """The fast path of ``controller``'s SEND processor: its gate holds the topic table, the
    broker config and the statistics; no store until :func:`bind_store`."""
    # a request-reply request gets the CLUSTER property on the Python path (send._with_cluster)
    marks = (*_MARKS, MessageConst.MESSAGE_REPLY_TO_CLIENT + "\x01")
    # the classes whose slots the fast path reads per SEND (anything else declines)
    gate = SendGate(
        controller.topic_config_manager.topic_config_table,
        controller.broker_config,
        controller.stats,
        BrokerConfig,
        TopicConfig,
    )
    controller.stats.add_fold(gate.counters.take, controller.stats.apply_put_counts)  # its C counters
    return SendFastPath(
        header_spec(),
        gate,
        frozenset(TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET),
        MixAll.RETRY_GROUP_TOPIC_PREFIX,
        marks,
        json_header_decoder(),
    )


def bind_store(fast: SendFastPath, appender: Appender | None) -> None:
    """Let ``fast`` write through ``appender`` (the running store's), or decline every SEND
    (None: the broker is not ready)."""
    fast.gate.appender = appender
