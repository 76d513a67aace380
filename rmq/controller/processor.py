"""The controller's request processor (Java 5.3.3 ``ControllerRequestProcessor``).

BROKER_HEARTBEAT (904) and CONTROLLER_GET_METADATA_INFO (1005) are answered by every
controller; CONTROLLER_ALTER_SYNC_STATE_SET (1001), CONTROLLER_ELECT_MASTER (1002),
CONTROLLER_REGISTER_BROKER (1003), CONTROLLER_GET_REPLICA_INFO (1004),
CONTROLLER_GET_SYNC_STATE_DATA (1006), CLEAN_BROKER_DATA (1011),
CONTROLLER_GET_NEXT_BROKER_ID (1012) and CONTROLLER_APPLY_BROKER_ID (1013) by the leader only
(a follower answers CONTROLLER_NOT_LEADER, its remark naming the leader's address);
GET_CONTROLLER_CONFIG (1010) gives the properties. Anything else, UPDATE_CONTROLLER_CONFIG
included (the settings are fixed at start), is REQUEST_CODE_NOT_SUPPORTED.

A malformed header or body is SYSTEM_ERROR naming the field, as everywhere; a request while
etcd cannot be reached is SYSTEM_ERROR saying so (nothing changed).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from rmq.common.log import RateLimitedLog, clip
from rmq.config import format_properties
from rmq.controller.etcd import EtcdError
from rmq.controller.manager import Latency, NotLeader, _Refused
from rmq.controller.state import Decision
from rmq.errors import RemotingCommandError
from rmq.protocol.body.controller import SyncStateSet
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from rmq.remoting.plain_acl import AclError, PlainAccounts, acl_guard

if TYPE_CHECKING:
    from rmq.controller.manager import ControllerManager
    from rmq.remoting.connection import Connection

__all__ = ["ControllerAcl", "ControllerProcessor", "Guarded", "WRITE_CODES"]

log = logging.getLogger("rmq.controller")

#: The codes that change the controller's state or vouch for a broker's liveness.
WRITE_CODES = frozenset(
    (
        RequestCode.BROKER_HEARTBEAT,
        RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        RequestCode.CONTROLLER_ELECT_MASTER,
        RequestCode.CONTROLLER_REGISTER_BROKER,
        RequestCode.CLEAN_BROKER_DATA,
        RequestCode.CONTROLLER_APPLY_BROKER_ID,
        RequestCode.UPDATE_CONTROLLER_CONFIG,
    )
)

_ORIGIN = "org.apache.rocketmq.controller.processor.ControllerRequestProcessor(rmq aclEnable)"


class ControllerAcl(PlainAccounts):
    """``aclEnable`` on the controller: :data:`WRITE_CODES` need a white address or an account
    with ``admin: true`` (the name server's rule, the broker's accounts file)."""

    def check(self, cmd: RemotingCommand, remote_host: str) -> AclError | None:
        return self.admin_only(cmd, remote_host, WRITE_CODES, "the controller", _ORIGIN)


class Guarded:
    """The processor behind the ACL check."""

    def __init__(self, acl: Any, processor: ControllerProcessor) -> None:
        self.process_request = acl_guard(acl, processor.process_request)


def _request_type(code: int) -> str:
    try:
        return RequestCode(code).name.lower()
    except ValueError:
        return "unknown"


class ControllerProcessor:
    """Serves the controller codes (registered as the default processor)."""

    def __init__(self, manager: ControllerManager) -> None:
        self.m = manager
        self._rate_log = RateLimitedLog(log)
        self._handlers: dict[int, Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand]]] = {
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            RequestCode.CONTROLLER_ELECT_MASTER: self.elect_master,
            RequestCode.CONTROLLER_REGISTER_BROKER: self.register_broker,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self.get_replica_info,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self.get_sync_state_data,
            RequestCode.CLEAN_BROKER_DATA: self.clean_broker_data,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self.get_next_broker_id,
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self.apply_broker_id,
        }

    def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        code = cmd.code
        if code == RequestCode.BROKER_HEARTBEAT:
            return self._count(cmd, self.broker_heartbeat(conn, cmd))
        if code == RequestCode.CONTROLLER_GET_METADATA_INFO:
            return self._count(cmd, cmd.response(ResponseCode.SUCCESS, None, self.m.metadata()))
        if code == RequestCode.GET_CONTROLLER_CONFIG:
            from rmq.config import describe

            props = {k: v for k, v in describe(self.m.config).items() if v is not None}
            return cmd.response(ResponseCode.SUCCESS, None, None, format_properties(props).encode())
        handler = self._handlers.get(code)
        if handler is None:
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported")
        if not self.m.is_leader():
            return self._count(cmd, self.not_leader(cmd))
        return self._run(handler, conn, cmd)

    def _count(self, cmd: RemotingCommand, resp: RemotingCommand) -> RemotingCommand:
        status = (
            "success" if resp.code in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST) else "failed"
        )
        k = (_request_type(cmd.code), status)
        self.m.stats.requests[k] = self.m.stats.requests.get(k, 0) + 1
        return resp

    def not_leader(self, cmd: RemotingCommand) -> RemotingCommand:
        leader = self.m.leader_address()
        where = f"; the leader is {leader}" if leader else "; no leader is known now"
        return cmd.response(ResponseCode.CONTROLLER_NOT_LEADER, "The controller is not in leader state" + where)

    async def _run(
        self,
        handler: Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand]],
        conn: Connection,
        cmd: RemotingCommand,
    ) -> RemotingCommand:
        t0 = time.monotonic()
        try:
            resp = await handler(conn, cmd)
        except NotLeader:
            resp = self.not_leader(cmd)
        except _Refused as e:
            self._rate_log.warning(
                f"refused-{e.code}", "controller: refused a request from %s: %s", conn.remote_addr, e.remark
            )
            resp = cmd.response(e.code, e.remark)
        except EtcdError as e:
            self._rate_log.warning("etcd", "controller: etcd failed while serving code %d: %s", cmd.code, e)
            resp = cmd.response(
                ResponseCode.SYSTEM_ERROR, f"the controller cannot reach etcd, nothing changed: {clip(str(e), 300)}"
            )
        except (RemotingCommandError, ValueError) as e:
            self._rate_log.warning(
                f"malformed-{cmd.code}", "controller: refused code %d from %s: %s", cmd.code, conn.remote_addr, clip(e)
            )
            resp = cmd.response(ResponseCode.SYSTEM_ERROR, clip(str(e), 500))
        took = time.monotonic() - t0
        if took > 1.0:
            self._rate_log.warning("slow", "controller: code %d took %.1f s", cmd.code, took)
        kind = _request_type(cmd.code)
        latency = self.m.stats.request_latency.get(kind)
        if latency is None:
            latency = self.m.stats.request_latency[kind] = Latency()
        latency.observe(took * 1e6)
        return self._count(cmd, resp)

    @staticmethod
    def _answer(cmd: RemotingCommand, d: Decision) -> RemotingCommand:
        return cmd.response(d.code, d.remark, d.header, d.body)

    # -- handlers ------------------------------------------------------------------------------

    def broker_heartbeat(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = cmd.decode_header(BrokerHeartbeatRequestHeader)
        if h.broker_id is None:
            return cmd.response(ResponseCode.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
        self.m.check_broker_name(h.broker_name)
        if not self.m.heartbeat(h, conn):
            self._rate_log.warning(
                "heartbeat-full",
                "controller: heartbeat table full, %s/%d refused",
                clip(h.broker_name, 80),
                h.broker_id,
            )
            return cmd.response(ResponseCode.CONTROLLER_INVALID_REQUEST, "the controller's heartbeat table is full")
        return cmd.response(ResponseCode.SUCCESS, "Heart beat success")

    async def alter_sync_state_set(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = cmd.decode_header(AlterSyncStateSetRequestHeader)
        try:
            proposed = SyncStateSet.decode(cmd.body_bytes())
        except ValueError as e:
            raise RemotingCommandError(f"malformed SyncStateSet body: {e}") from None
        if len(proposed.sync_state_set) > self.m.config.max_replicas_per_broker_name:
            raise RemotingCommandError("the SyncStateSet has more members than a broker name may have replicas")
        return self._answer(cmd, await self.m.alter(h, proposed))

    async def elect_master(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = cmd.decode_header(ElectMasterRequestHeader)
        self.m.check_broker_name(h.broker_name)
        return self._answer(cmd, await self.m.elect(h))

    async def register_broker(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = cmd.decode_header(RegisterBrokerToControllerRequestHeader)
        self.m.check_broker_name(h.broker_name)
        return self._answer(cmd, await self.m.register(h))

    async def get_replica_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = cmd.decode_header(GetReplicaInfoRequestHeader)
        return self._answer(cmd, await self.m.replica_info(h))

    async def get_sync_state_data(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        body = self.m.sync_state_data(cmd.body_bytes())
        return cmd.response(ResponseCode.SUCCESS, None, None, body)

    async def clean_broker_data(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = cmd.decode_header(CleanControllerBrokerDataRequestHeader)
        return self._answer(cmd, await self.m.clean(h))

    async def get_next_broker_id(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = cmd.decode_header(GetNextBrokerIdRequestHeader)
        self.m.check_broker_name(h.broker_name)
        return self._answer(cmd, await self.m.next_id(h))

    async def apply_broker_id(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = cmd.decode_header(ApplyBrokerIdRequestHeader)
        self.m.check_broker_name(h.broker_name)
        if len(h.register_check_code) > 1024:
            raise RemotingCommandError("registerCheckCode is longer than 1024 characters")
        self.m.check_new_name(h.broker_name)
        return self._answer(cmd, await self.m.apply_id(h))
