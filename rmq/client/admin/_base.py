"""The connection and call plumbing every admin area shares (Java ``DefaultMQAdminExtImpl``'s
``MQClientAPIImpl`` part): name-server and broker calls with a timeout, refusals raised as
:class:`~rmq.errors.BrokerResponseError`, the cluster table and master lookups."""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Sequence
from typing import Any, Self, TypeVar

from rmq.common.constants import MixAll
from rmq.common.route import ClusterInfo, TopicRouteData
from rmq.errors import BrokerResponseError
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests import check_success
from rmq.protocol.requests.namesrv import get_broker_cluster_info, get_route_info, parse_cluster_info, parse_topic_route
from rmq.remoting import RemotingClient
from rmq.remoting.acl import AclClientRPCHook, SessionCredentials
from rmq.remoting.tls import resolve_client_tls

T = TypeVar("T")

#: Seconds each remote call may take, as mqadmin's default ``timeoutMillis`` (5 s is Java
#: DefaultMQAdminExt's ``timeoutMillis``).
DEFAULT_TIMEOUT = 5.0

#: The environment variable Java's tools read when ``-n`` is not given (MixAll.NAMESRV_ADDR_ENV).
NAMESRV_ADDR_ENV = MixAll.NAMESRV_ADDR_ENV


class AdminError(BrokerResponseError):
    """A broker or name server refused an admin request, or the cluster cannot serve it.

    ``addr`` is the peer that answered (None for a refusal decided locally, such as an unknown
    cluster). Not retriable: the same request gets the same answer until the operator acts.
    """

    def __init__(self, message: str, *, code: int = -1, remark: str | None = None, addr: str | None = None) -> None:
        super().__init__(code, remark if remark is not None else message)
        self.addr = addr
        self.args = (message,)

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> Any:  # keep pickling working (BrokerResponseError's takes code, remark)
        return (_rebuild_admin_error, (self.args[0], self.code, self.remark, self.addr))


def _rebuild_admin_error(message: str, code: int, remark: str | None, addr: str | None) -> AdminError:
    return AdminError(message, code=code, remark=remark, addr=addr)


def resolve_namesrv_addr(namesrv_addr: str | Sequence[str] | None) -> list[str]:
    """Name-server addresses from the argument, else ``$NAMESRV_ADDR`` (``;``-separated, as
    Java's tools); raises ``ValueError`` when neither gives one."""
    if namesrv_addr is None:
        namesrv_addr = os.environ.get(NAMESRV_ADDR_ENV) or None
        if namesrv_addr is None:
            raise ValueError(f"no name server address: pass namesrv_addr (-n) or set {NAMESRV_ADDR_ENV}")
    addrs = [a.strip() for a in namesrv_addr.split(";")] if isinstance(namesrv_addr, str) else list(namesrv_addr)
    addrs = [a for a in addrs if a]
    if not addrs:
        raise ValueError("no name server address given")
    return addrs


class AdminBase:
    """Connections and calls; the areas (topics, messages, consumers, brokers, operations)
    are mixins over this.

    Args:
        namesrv_addr: ``"host:port"``, ``"h1:p1;h2:p2"`` or a list; default ``$NAMESRV_ADDR``.
        timeout: seconds per remote call (default 5.0, mqadmin's).
        access_key / secret_key: ACL credentials: every request is signed (Java
            ``AclClientRPCHook``); default None = unsigned.
        tls: ``True``, an ``ssl.SSLContext``, or None (default, plain TCP): as for the producer.
        vip_channel: send every broker call to the broker's VIP port, ``port - 2`` (Java
            ``ClientConfig.vipChannelEnabled`` and ``MixAll.brokerVIPChannel``); default False.
            Java brokers serve every code there; rmq brokers only the slave's reads (see
            ``rmq.broker.vip_channel``).
    """

    def __init__(
        self,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: bool | ssl.SSLContext | None = None,
        vip_channel: bool = False,
    ) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, not {timeout!r}")
        self.namesrv_addrs = resolve_namesrv_addr(namesrv_addr)
        self.timeout = timeout
        credentials = SessionCredentials.of(access_key, secret_key)  # ValueError when half given
        self._remote = RemotingClient(self.namesrv_addrs, tls=resolve_client_tls(tls))
        if credentials is not None:
            self._remote.add_rpc_hook(AclClientRPCHook(credentials))
        # The producer a sending tool makes (sendMessage, sendMsgStatus, checkMsgSendRT, clusterRT)
        # signs and encrypts as this admin does.
        self._credentials = credentials
        self._tls = tls
        self.vip_channel = vip_channel

    async def close(self) -> None:
        """Close every connection (idempotent)."""
        await self._remote.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- calls ---------------------------------------------------------------------------

    async def _call_namesrv(self, cmd: RemotingCommand, parse: Callable[[RemotingCommand], T]) -> T:
        """One request to the first name server that answers; a refusal raises AdminError."""
        resp = await self._remote.invoke_namesrv(cmd, timeout=self.timeout)
        try:
            return parse(resp)
        except BrokerResponseError as e:
            raise AdminError(f"name server answered code {e.code}: {e.remark}", code=e.code, remark=e.remark) from None

    async def _call(self, addr: str, cmd: RemotingCommand, parse: Callable[[RemotingCommand], T]) -> T:
        """One request to ``addr`` (a broker or one name server); a refusal raises AdminError
        naming the address."""
        if self.vip_channel and addr not in self.namesrv_addrs:
            addr = MixAll.broker_vip_channel(True, addr)
        resp = await self._remote.invoke(addr, cmd, timeout=self.timeout)
        try:
            return parse(resp)
        except BrokerResponseError as e:
            raise AdminError(
                f"{addr} answered code {e.code}: {e.remark}", code=e.code, remark=e.remark, addr=addr
            ) from None

    async def _call_ok(self, addr: str, cmd: RemotingCommand) -> None:
        """A request whose only answer is SUCCESS (admin writes)."""
        await self._call(addr, cmd, check_success)

    async def _call_each_namesrv(
        self, make: Callable[[], RemotingCommand], parse: Callable[[RemotingCommand], T]
    ) -> dict[str, T]:
        """The same request to every name server (writes such as deleteTopic, KV config and
        wipeWritePerm go to all of them, as Java's admin does); ``{addr: result}``."""
        return {addr: await self._call(addr, make(), parse) for addr in self.namesrv_addrs}

    # -- cluster lookups -----------------------------------------------------------------

    async def examine_broker_cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: every cluster, broker name and broker address."""
        return await self._call_namesrv(get_broker_cluster_info(), parse_cluster_info)

    async def examine_topic_route_info(self, topic: str) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC; AdminError when the name server has no route for ``topic``."""
        route = await self._call_namesrv(get_route_info(topic), parse_topic_route)
        if route is None:
            raise AdminError(f"the name server has no route for topic {topic}")
        return route

    async def master_addrs(self, cluster: str | None = None, broker_addr: str | None = None) -> list[str]:
        """Where a broker write goes, as mqadmin's ``-b`` / ``-c``: ``broker_addr`` alone, else
        the master of every broker of ``cluster``, else every master the name server knows."""
        if broker_addr:
            return [broker_addr]
        info = await self.examine_broker_cluster_info()
        if cluster and cluster not in info.cluster_addr_table:
            raise AdminError(f"cluster [{cluster}] is not known to the name server")
        masters = list(info.master_addrs(cluster or None).values())
        if not masters:
            raise AdminError("no master broker is registered with the name server")
        return masters
