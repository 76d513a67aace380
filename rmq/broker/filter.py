"""Property (SQL92) filters on the broker: compiled once, checked for clients.

``ConsumerFilterManager`` (Java ``ConsumerFilterManager`` without the bloom filter) keeps the
compiled filter of each (expression type, expression text) in a least-recently-used table
bounded by ``filterCacheSize``; a pull finds its filter there, so an expression is parsed once
however many groups, topics and subscription versions use it. Failures are kept too (Java
``SelectorParser`` caches its exceptions), so a client repeating a bad expression costs one
lookup. A miss is compiled off the event loop (one thread of its own), at most
``sql92CompilesPerConnection`` at once for one connection and ``sql92CompilesTotal`` in all;
past them the pull is answered SYSTEM_BUSY. With ``enablePropertyFilter=false`` nothing is
compiled: the pull is refused first (Java's SYSTEM_ERROR and remark). An expression is at most
``MAX_EXPRESSION_LENGTH`` (4096) characters and ``MAX_DEPTH`` levels deep (rmq.common.sql92).

Java's SQL92 filter can also pre-filter on a bloom-filter bit map stored in the ConsumeQueue
extension (``enableCalcFilterBitMap`` / ``enableConsumeQueueExt``, both off by default); rmq
keeps no ConsumeQueue extension, so every message of a SQL92 subscription is evaluated against
its properties during the pull scan (``rmq.store`` ``get_message``).

``rmq.broker.processors.client_manage.CheckClientConfigProcessor`` answers CHECK_CLIENT_CONFIG
(46) with ``compile_filter``, which clients send when they start with a non-TAG subscription.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
from collections import OrderedDict
from typing import Any, cast

from rmq.common.constants import ExpressionType
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.common.sql92 import SelectorError, compile_sql92
from rmq.store import MessageFilter

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)

__all__ = ["CompileBusy", "ConsumerFilterManager", "is_tag_type", "unsupported_remark"]


def is_tag_type(expression_type: str | None) -> bool:
    """Java ``ExpressionType.isTagType``: no type, empty, or TAG (any case, as rmq always
    accepted)."""
    return not expression_type or expression_type.upper() == ExpressionType.TAG


def unsupported_remark(expression_type: str) -> str:
    """The remark Java answers when ``enablePropertyFilter`` is off."""
    return f"The broker does not support consumer to filter message by {clip_remark(expression_type)}"


def compile_filter(expression_type: str, expression: str | None) -> MessageFilter:
    """A store filter for a non-TAG subscription; ``SelectorError`` when the type is unknown
    or the expression does not compile (Java ``FilterFactory.get(type).compile``)."""
    if expression_type.upper() != ExpressionType.SQL92:
        raise SelectorError(f"unknown expression type {clip(expression_type)}")
    return MessageFilter.for_properties(compile_sql92(expression or ""))


class CompileBusy(Exception):
    """Too many SQL92 expressions are compiling (for this connection or in all): the pull or
    check is answered SYSTEM_BUSY, the client retries."""


_COMPILING = "sql92Compiling"  # Connection.attributes key: this connection's compilations


class ConsumerFilterManager:
    """Compiled property filters by expression text, least recently used first out past
    ``capacity``; compiled off the event loop, a bounded number at a time.

    Java keys its filters by group and topic and recompiles on each new subscription version;
    keyed by the text, a client sending a new ``subVersion`` with every pull (or many groups
    sharing one expression) costs a lookup, not a parse. A miss is compiled in a thread of its
    own (:meth:`start`, :meth:`wait`), one at a time: at most ``per_connection`` started or
    queued for one connection and ``total`` in all, past which :class:`CompileBusy` is raised
    (the request is answered SYSTEM_BUSY); the same text compiling already is awaited, not
    compiled twice.

    Args:
        capacity: compiled filters (and failures) kept (default 4096, ``filterCacheSize``).
        per_connection: compilations one connection may have running (default 4,
            ``sql92CompilesPerConnection``).
        total: compilations running in all (default 16, ``sql92CompilesTotal``).
    """

    def __init__(self, capacity: int = 4096, per_connection: int = 4, total: int = 16) -> None:
        self.capacity = capacity
        self.per_connection = per_connection
        self.total = total
        self._table: OrderedDict[tuple[str, str], MessageFilter | SelectorError] = OrderedDict()
        self._compiling: dict[tuple[str, str], asyncio.Future[MessageFilter | SelectorError]] = {}
        self.compiles = 0  # compilations run (for tests and metrics)
        # One thread: a compilation holds the GIL (the parser is Python), so two or more at
        # once would leave the event loop a small share of it; queued ones wait their turn
        # (at most ``total``).
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    def __len__(self) -> int:
        return len(self._table)

    @staticmethod
    def _key(expression_type: str, expression: str | None) -> tuple[str, str]:
        return expression_type.upper(), expression or ""

    def lookup(self, expression_type: str, expression: str | None) -> MessageFilter | None:
        """The cached filter of this expression, None when it is not compiled yet; raises the
        cached ``SelectorError`` of a bad one."""
        key = self._key(expression_type, expression)
        found = self._table.get(key)
        if found is None:
            return None
        self._table.move_to_end(key)
        if isinstance(found, SelectorError):
            raise found
        return found

    def _store(self, key: tuple[str, str], found: MessageFilter | SelectorError) -> None:
        table = self._table
        table[key] = found
        table.move_to_end(key)
        while len(table) > self.capacity:
            table.popitem(last=False)

    def get(self, expression_type: str, expression: str | None) -> MessageFilter:
        """The compiled filter, compiled here and now on a miss (for callers off the loop and
        tests); raises ``SelectorError`` (cached) when the expression is bad."""
        found = self.lookup(expression_type, expression)
        if found is not None:
            return found
        key = self._key(expression_type, expression)
        try:
            result: MessageFilter | SelectorError = compile_filter(expression_type, expression)
        except SelectorError as e:
            result = e
        self.compiles += 1
        self._store(key, result)
        if isinstance(result, SelectorError):
            raise result
        return result

    def start(self, conn: Any, expression_type: str, expression: str | None) -> asyncio.Future[Any]:
        """Start compiling off the loop (or join the compilation of the same text running
        already) and return its future; :meth:`wait` gives the filter. Raises
        :class:`CompileBusy` past ``per_connection`` or ``total`` compilations."""
        key = self._key(expression_type, expression)
        fut = self._compiling.get(key)
        if fut is not None:
            return fut
        mine = conn.attributes.get(_COMPILING, 0)
        running = len(self._compiling)
        if mine >= self.per_connection or running >= self.total:
            _rlog.warning(
                "sql92-compile-busy",
                "%s: %d SQL92 compilations of its own running "
                "(sql92CompilesPerConnection=%d), %d in all (sql92CompilesTotal=%d): answered SYSTEM_BUSY",
                conn.remote_addr,
                mine,
                self.per_connection,
                running,
                self.total,
            )
            raise CompileBusy(
                f"[SQL92_COMPILE_LIMIT]too many SQL92 expressions compiling ({mine} of this "
                f"connection, {running} in all), try again later"
            )
        conn.attributes[_COMPILING] = mine + 1
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rmq-sql92")
        fut = self._compiling[key] = loop.run_in_executor(
            self._executor, _compile_or_error, expression_type, expression
        )
        fut.add_done_callback(functools.partial(self._compiled, key, conn))
        return fut

    def _compiled(self, key: tuple[str, str], conn: Any, fut: asyncio.Future[Any]) -> None:
        self._compiling.pop(key, None)
        conn.attributes[_COMPILING] = conn.attributes.get(_COMPILING, 1) - 1
        if not fut.cancelled() and fut.exception() is None:
            self.compiles += 1
            self._store(key, fut.result())

    def close(self) -> None:
        """Stop the compiling thread (queued compilations are dropped)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    @staticmethod
    async def wait(fut: asyncio.Future[Any]) -> MessageFilter:
        """The filter :meth:`start` is compiling; raises ``SelectorError`` for a bad expression."""
        found = await asyncio.shield(fut)
        if isinstance(found, SelectorError):
            raise found
        return cast(MessageFilter, found)


def _compile_or_error(expression_type: str, expression: str | None) -> MessageFilter | SelectorError:
    """``compile_filter`` for an executor thread: the error is returned, to be cached."""
    try:
        return compile_filter(expression_type, expression)
    except SelectorError as e:
        return e
