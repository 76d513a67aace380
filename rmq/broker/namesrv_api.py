"""BrokerOuterAPI: the broker's calls to name servers (REGISTER_BROKER, UNREGISTER_BROKER).

Registration carries the whole topic table as Java's ``RegisterBrokerBody`` JSON
(``{"topicConfigSerializeWrapper":{"topicConfigTable":…,"dataVersion":…},"filterServerList":[]}``),
or with ``compressedRegister`` in Java's deflated form (:mod:`rmq.protocol.body.register`), with
``bodyCrc32`` in the header, so a Java name server accepts it as well as ours. It goes to every
configured name server in parallel; one that is down is logged and skipped, the next round
(30 s) tries again. :meth:`BrokerOuterAPI.need_register` is Java's ``needRegister``
(QUERY_DATA_VERSION): which name servers lack the table of a version.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import zlib
from typing import Any

from rmq.broker.processors.common import to_json_bytes
from rmq.common import fastjson
from rmq.protocol.body.register import compressed_register_raw, topic_lines
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.namesrv import QueryDataVersionRequestHeader, QueryDataVersionResponseHeader
from rmq.remoting.acl import AclClientRPCHook, SessionCredentials
from rmq.remoting.client import RemotingClient

log = logging.getLogger("rmq.broker")


class BrokerOuterAPI:
    """Talks to the name servers on behalf of one broker.

    Args:
        namesrv_addrs: ``["host:port", ...]``; may be empty (a broker without name servers
            still serves clients that know its address).
        tls: an ``ssl.SSLContext`` to reach the name servers over TLS (Java
            ``NettyClientConfig.useTLS``); default None = plain TCP.
        credentials: sign every request with these keys (``namesrvAccessKey`` /
            ``namesrvSecretKey``, for a name server with ``aclEnable``); default None = unsigned,
            as Java's broker.
    """

    def __init__(
        self, namesrv_addrs: list[str], tls: ssl.SSLContext | None = None, credentials: SessionCredentials | None = None
    ):
        self.namesrv_addrs = list(namesrv_addrs)
        self.client = RemotingClient(self.namesrv_addrs or None, tls=tls)
        if credentials is not None:
            self.client.add_rpc_hook(AclClientRPCHook(credentials))
        # The last REGISTER_BROKER answer's masterAddr / haServerAddr (Java RegisterBrokerResult:
        # set for a slave once its master registered; empty strings otherwise).
        self.master_addr = ""
        self.ha_server_addr = ""
        self.last_body_size = 0  # bytes of the last REGISTER_BROKER body (the scale bench reads it)

    async def close(self) -> None:
        await self.client.close()

    async def register_broker_all(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: dict[str, Any],
        timeout: float,
        compressed: bool = False,
    ) -> list[tuple[str, bool]]:
        """Register with every name server; returns ``[(addr, ok), ...]``. ``compressed``
        (default False): Java's deflated body (``compressedRegister``)."""
        body = await encode_register_body(topic_config_wrapper, compressed)
        self.last_body_size = len(body)
        ext = {
            "brokerAddr": broker_addr,
            "brokerId": str(broker_id),
            "brokerName": broker_name,
            "clusterName": cluster_name,
            "haServerAddr": ha_server_addr,
            "compressed": "true" if compressed else "false",
            "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
        }

        async def one(addr: str) -> tuple[str, bool]:
            cmd = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(ext), body)
            try:
                resp = await self.client.invoke(addr, cmd, timeout=timeout)
            except Exception as e:  # noqa: BLE001 - a name server being down is routine
                log.warning("register broker to name server %s failed: %s", addr, e)
                return addr, False
            if resp.code != ResponseCode.SUCCESS:
                log.warning("register broker to name server %s refused: code=%s %s", addr, resp.code, resp.remark)
                return addr, False
            answer = resp.ext_fields or {}
            self.master_addr = str(answer.get("masterAddr") or "")
            self.ha_server_addr = str(answer.get("haServerAddr") or "")
            return addr, True

        if not self.namesrv_addrs:
            return []
        return list(await asyncio.gather(*(one(a) for a in self.namesrv_addrs)))

    async def need_register(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        data_version: dict[str, Any],
        timeout: float,
    ) -> list[str]:
        """The name servers that lack the topic table of ``data_version`` (Java
        ``BrokerOuterAPI.needRegister``): QUERY_DATA_VERSION to each in parallel; one that
        answers ``changed``, holds another version, or cannot be asked is listed. One that
        answers unchanged has refreshed the broker's registration time."""
        ext = QueryDataVersionRequestHeader(
            broker_name=broker_name, broker_addr=broker_addr, cluster_name=cluster_name, broker_id=broker_id
        ).to_ext_fields()
        body = to_json_bytes(data_version)

        async def one(addr: str) -> bool:
            cmd = RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, dict(ext), body)
            try:
                resp = await self.client.invoke(addr, cmd, timeout=timeout)
            except Exception as e:  # noqa: BLE001 - a name server being down is routine: register
                log.warning("query data version from name server %s failed: %s", addr, e)
                return True
            if resp.code != ResponseCode.SUCCESS:
                return True
            changed = QueryDataVersionResponseHeader.from_ext_fields(resp.ext_fields or {}).changed
            held = resp.body_bytes()
            if held:
                try:
                    if not same_data_version(fastjson.loads(held), data_version):
                        changed = True
                except ValueError:
                    changed = True
            return changed is None or changed

        if not self.namesrv_addrs:
            return []
        stale = await asyncio.gather(*(one(a) for a in self.namesrv_addrs))
        return [a for a, s in zip(self.namesrv_addrs, stale, strict=True) if s]

    async def unregister_broker_all(
        self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int, timeout: float
    ) -> None:
        ext = {
            "brokerAddr": broker_addr,
            "brokerId": str(broker_id),
            "brokerName": broker_name,
            "clusterName": cluster_name,
        }

        async def one(addr: str) -> None:
            try:
                await self.client.invoke(
                    addr, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(ext)), timeout=timeout
                )
                log.info("unregistered broker from name server %s", addr)
            except Exception as e:  # noqa: BLE001 - shutting down anyway
                log.warning("unregister broker from name server %s failed: %s", addr, e)

        await asyncio.gather(*(one(a) for a in self.namesrv_addrs))


_TOPICS_PER_SLICE = 256


def same_data_version(a: object, b: object) -> bool:
    """Java 4.9.8 ``DataVersion.equals``: the same timestamp and counter (a Java 5 name server's
    ``stateVersion`` is not compared)."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    return bool(a.get("timestamp") == b.get("timestamp") and a.get("counter") == b.get("counter"))


async def encode_register_body(topic_config_wrapper: dict[str, Any], compressed: bool = False) -> bytes:
    """The REGISTER_BROKER body (Java ``RegisterBrokerBody`` JSON, or with ``compressed`` its
    deflated form, ``RegisterBrokerBody.encode(true)``) for ``topic_config_wrapper``.

    Encoded in slices of 256 topics with a yield to the loop between them: the body carries
    the whole topic table (Java registers it all too), and one ``json.dumps`` of some thousand
    topics would hold the loop for tens of milliseconds; the deflate (level 9, as Java) runs in
    a worker thread. ``topic_config_wrapper`` must be a snapshot
    (``TopicConfigManager.serialize_wrapper`` builds new dicts), so the table may change meanwhile.
    """
    items = list(topic_config_wrapper["topicConfigTable"].items())
    parts: list[bytes] = []
    for i in range(0, len(items), _TOPICS_PER_SLICE):
        if i:
            await asyncio.sleep(0)
        chunk = dict(items[i : i + _TOPICS_PER_SLICE])
        parts.append(topic_lines(chunk) if compressed else to_json_bytes(chunk)[1:-1])  # members, no braces
    if compressed:
        raw = compressed_register_raw(topic_config_wrapper.get("dataVersion", {}), len(items), parts)
        return await asyncio.to_thread(zlib.compress, raw, 9)
    table = b"{" + b",".join(p for p in parts if p) + b"}"
    version = to_json_bytes(topic_config_wrapper.get("dataVersion", {}))
    return (
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":'
        + table
        + b',"dataVersion":'
        + version
        + b'},"filterServerList":[]}'
    )
