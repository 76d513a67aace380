"""END_TRANSACTION (37): a producer commits or rolls back a half message (Java ``EndTransactionProcessor``).

Header (``EndTransactionRequestHeader``): ``producerGroup``, ``tranStateTableOffset`` (the
half message's queue offset), ``commitLogOffset`` (its CommitLog offset), ``commitOrRollback``
(``MessageSysFlag`` 0 unknown / 8 commit / 12 rollback), ``fromTransactionCheck``, ``msgId``,
``transactionId``. Clients send it oneway; the reply, when asked for, is SUCCESS or
SYSTEM_ERROR with the reason (Java's remarks). The work is done by
``rmq.broker.transaction.TransactionalMessageService.end_transaction``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmq.broker.processors.common import bad_request
from rmq.errors import RemotingCommandError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.message import EndTransactionRequestHeader

if TYPE_CHECKING:
    from rmq.broker.context import EndTransactionContext
    from rmq.remoting.connection import Connection

log = logging.getLogger("rmq.broker.transaction")


class EndTransactionProcessor:
    """Handles code 37 (async: the commit is a store put)."""

    codes = (RequestCode.END_TRANSACTION,)

    def __init__(self, controller: EndTransactionContext):
        self.controller = controller

    def reject_request(self) -> bool:
        return False

    async def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            header = EndTransactionRequestHeader.from_ext_fields(cmd.ext_fields)
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)
        if self.controller.is_slave:
            log.warning("END_TRANSACTION from %s refused: this broker is a slave", conn.remote_addr)
            return cmd.response(ResponseCode.SLAVE_NOT_AVAILABLE, "Can not process the message in slave", {})
        return await self.controller.transaction_service.end_transaction(conn, cmd, header)
