"""The name server's request processor (Java ``DefaultRequestProcessor``).

REGISTER_BROKER (103), UNREGISTER_BROKER (104), GET_ROUTEINFO_BY_TOPIC (105),
GET_BROKER_CLUSTER_INFO (106), GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206),
DELETE_TOPIC_IN_NAMESRV (216), GET_TOPICS_BY_CLUSTER (224), QUERY_DATA_VERSION (322),
WIPE_WRITE_PERM_OF_BROKER (205) / ADD_WRITE_PERM_OF_BROKER (327), GET_NAMESRV_CONFIG (319) /
UPDATE_NAMESRV_CONFIG (318, rmq.namesrv.configuration), and the KV config codes (PUT 100,
GET 101, DELETE 102, GET_KVLIST_BY_NAMESPACE 219; rmq.namesrv.kv_config, bounded and persisted
as Java's kvConfig.json when ``kvConfigPath`` is set). GET_KV_CONFIG_BY_VALUE (217, which
ali-ons sends and Java 4.x no longer knows) and DELETE_KV_CONFIG_BY_VALUE (218) answer
QUERY_NOT_FOUND, which the client swallows, instead of REQUEST_CODE_NOT_SUPPORTED. Any other
code gets REQUEST_CODE_NOT_SUPPORTED naming it.
"""

from __future__ import annotations

import inspect
import logging
import zlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from rmq.common import fastjson
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.config import ConfigError, ConfigUpdateRefused, format_properties, parse_properties
from rmq.errors import RemotingCommandError
from rmq.namesrv.kv_config import KVConfigRefused
from rmq.namesrv.route_manager import RegistrationRefused, decode_register_body
from rmq.protocol.body.ops import KVTable
from rmq.protocol.body.register import decode_compressed_register_body
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.namesrv import (
    GetKVConfigRequestHeader,
    GetRouteInfoRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)

if TYPE_CHECKING:
    from rmq.namesrv.controller import NamesrvController
    from rmq.remoting.connection import Connection

log = logging.getLogger("rmq.namesrv")

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
GET_KV_CONFIG_BY_VALUE = 217  # gone from Java's RequestCode; ali-ons still sends it
DELETE_KV_CONFIG_BY_VALUE = 218
ORDER_TOPIC_CONFIG_NAMESPACE = "ORDER_TOPIC_CONFIG"


class NamesrvProcessor:
    """Serves every name-server code (registered as the default processor)."""

    def __init__(self, controller: NamesrvController) -> None:
        self.controller = controller
        self.route = controller.route_info_manager
        self.kv = controller.kv_config_manager
        self._rate_log = RateLimitedLog(log)
        self._handlers: dict[
            int, Callable[[Connection, RemotingCommand], RemotingCommand | Awaitable[RemotingCommand]]
        ] = {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            GET_KV_CONFIG_BY_VALUE: self.kv_by_value,
            DELETE_KV_CONFIG_BY_VALUE: self.kv_by_value,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
        }

    def reject_request(self) -> bool:
        return False

    def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        handler = self._handlers.get(cmd.code)
        if handler is None:
            self._rate_log.warning(
                f"unsupported:{conn.remote_addr}",
                "namesrv: %s sent request code %s, which is not supported",
                conn.remote_addr,
                cmd.code,
            )
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request type {cmd.code} not supported", {})
        try:
            result = handler(conn, cmd)
        except RemotingCommandError as e:
            return self._bad_request(conn, cmd, e)
        if inspect.isawaitable(result):
            return self._finish(conn, cmd, result)
        return result

    async def _finish(
        self, conn: Connection, cmd: RemotingCommand, result: Awaitable[RemotingCommand]
    ) -> RemotingCommand:
        try:
            return await result
        except RemotingCommandError as e:
            return self._bad_request(conn, cmd, e)

    def _bad_request(self, conn: Connection, cmd: RemotingCommand, e: RemotingCommandError) -> RemotingCommand:
        self._rate_log.warning(
            f"bad-request:{conn.remote_addr}",
            "namesrv: bad request code=%s from %s: %s",
            cmd.code,
            conn.remote_addr,
            clip(e),
        )
        return cmd.response(ResponseCode.SYSTEM_ERROR, clip_remark(e), {})

    # -- brokers --------------------------------------------------------------------------

    def register_broker(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = RegisterBrokerRequestHeader.from_ext_fields(cmd.ext_fields)
        body = cmd.body_bytes()
        crc = cmd.ext_fields.get("bodyCrc32")
        try:
            crc = int(crc) if crc not in (None, "") else 0
        except (TypeError, ValueError):
            raise RemotingCommandError("RegisterBrokerRequestHeader.bodyCrc32 is not an integer") from None
        if crc and body and (zlib.crc32(body) & 0x7FFFFFFF) != crc:
            self._rate_log.warning(
                "register-crc", "register broker %s: body CRC mismatch, refused", clip(h.broker_addr)
            )
            return cmd.response(ResponseCode.SYSTEM_ERROR, "crc32 not match", {})
        table, data_version = None, None
        if body:
            if h.compressed:  # Java RegisterBrokerBody.decode(data, true)
                try:
                    table, data_version = decode_compressed_register_body(body, self.route.limits.max_topics_per_broker)
                except ValueError as e:
                    raise RemotingCommandError(f"REGISTER_BROKER: {clip(e)}") from None
            else:
                table, data_version = self._json_register_body(body)
        try:
            result = self.route.register_broker(
                h.cluster_name,
                h.broker_addr,
                h.broker_name,
                h.broker_id,
                h.ha_server_addr or "",
                table,
                data_version,
                conn,
            )
        except RegistrationRefused as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, clip_remark(e), {})
        ext = {"haServerAddr": result.ha_server_addr, "masterAddr": result.master_addr}
        return cmd.response(ResponseCode.SUCCESS, None, ext)

    @staticmethod
    def _json_register_body(body: bytes) -> tuple[Any, Any]:
        """(topicConfigTable, dataVersion) of a JSON RegisterBrokerBody (typed when it has the
        usual shape, else through fastjson)."""
        typed = decode_register_body(body)
        if typed is not None:
            return typed
        try:
            data = fastjson.loads(body)
            wrapper = data.get("topicConfigSerializeWrapper") or {}
            return wrapper.get("topicConfigTable") or {}, wrapper.get("dataVersion") or {}
        except (ValueError, AttributeError, RecursionError) as e:
            raise RemotingCommandError(f"REGISTER_BROKER body is not a RegisterBrokerBody: {clip(e)}") from None

    def unregister_broker(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = UnRegisterBrokerRequestHeader.from_ext_fields(cmd.ext_fields)
        try:
            self.route.check_unregister(h.broker_name, h.broker_addr, conn)
        except RegistrationRefused as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, clip_remark(e), {})
        self.route.unregister_broker(h.cluster_name, h.broker_addr, h.broker_name, h.broker_id)
        return cmd.response(ResponseCode.SUCCESS, None, {})

    def query_data_version(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Java ``queryBrokerTopicConfig``: whether the broker's table of the version in the
        body is here (``changed`` false refreshes its registration time), and the version held."""
        h = QueryDataVersionRequestHeader.from_ext_fields(cmd.ext_fields)
        try:
            asked = fastjson.loads(cmd.body_bytes() or b"{}")
        except ValueError as e:
            raise RemotingCommandError(f"QUERY_DATA_VERSION body is not a DataVersion: {clip(e)}") from None
        if not isinstance(asked, dict):
            raise RemotingCommandError("QUERY_DATA_VERSION body is not a DataVersion object")
        changed, held = self.route.check_data_version(h.broker_addr, asked, conn)
        ext = QueryDataVersionResponseHeader(changed=changed).to_ext_fields()
        return cmd.response(ResponseCode.SUCCESS, None, ext, fastjson.dumps(held) if held is not None else None)

    # -- routes ---------------------------------------------------------------------------

    def get_route_info_by_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetRouteInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        route = self.route.pick_topic_route_data(h.topic)
        if route is None:
            return cmd.response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {clip_remark(h.topic)}" + FAQ,
                {},
            )
        # Java DefaultRequestProcessor.getRouteInfoByTopic: the order conf only with
        # orderMessageEnable, read at each request so UPDATE_NAMESRV_CONFIG applies at once.
        if self.controller.config.order_message_enable:
            order_conf = self.kv.get(ORDER_TOPIC_CONFIG_NAMESPACE, h.topic)
            if order_conf:
                route["orderTopicConf"] = order_conf
        return cmd.response(ResponseCode.SUCCESS, None, {}, fastjson.dumps(route))

    def get_broker_cluster_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, None, {}, fastjson.dumps(self.route.get_all_cluster_info()))

    def get_all_topic_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(
            ResponseCode.SUCCESS, None, {}, fastjson.dumps({"topicList": self.route.get_all_topic_list()})
        )

    def get_topics_by_cluster(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        cluster = str(cmd.ext_fields.get("cluster") or "")
        topics = self.route.get_topics_by_cluster(cluster)
        return cmd.response(ResponseCode.SUCCESS, None, {}, fastjson.dumps({"topicList": topics}))

    def delete_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        topic = cmd.ext_fields.get("topic")
        if not topic:
            raise RemotingCommandError("DeleteTopicFromNamesrvRequestHeader.topic is missing")
        self.route.delete_topic(str(topic))
        return cmd.response(ResponseCode.SUCCESS, None, {})

    # -- KV config ------------------------------------------------------------------------

    async def put_kv_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Java DefaultRequestProcessor.putKVConfig; answered once the file (if any) is written."""
        h = PutKVConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        try:
            self.kv.put(h.namespace, h.key, h.value)
        except KVConfigRefused as e:
            self._rate_log.warning(
                f"kv-refused:{conn.remote_addr}", "namesrv: PUT_KV_CONFIG from %s refused: %s", conn.remote_addr, e
            )
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"PUT_KV_CONFIG refused: {clip_remark(e)}", {})
        return await self._persist_kv(cmd)

    async def _persist_kv(self, cmd: RemotingCommand) -> RemotingCommand:
        try:
            await self.kv.persist()
        except OSError as e:
            self._rate_log.warning("kv-persist", "namesrv: writing %s failed: %s", self.kv.path, e)
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"KV config changed in memory but writing {self.kv.path} failed: {clip_remark(e)}",
                {},
            )
        return cmd.response(ResponseCode.SUCCESS, None, {})

    def get_kv_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetKVConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        value = self.kv.get(h.namespace, h.key)
        if value is None:
            return cmd.response(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {clip_remark(h.namespace)} Key: {clip_remark(h.key)}",
                {},
            )
        return cmd.response(ResponseCode.SUCCESS, None, {"value": value})

    async def delete_kv_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Java deleteKVConfig: SUCCESS whether or not the item existed."""
        h = GetKVConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        self.kv.delete(h.namespace, h.key)
        return await self._persist_kv(cmd)

    def get_kv_list_by_namespace(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        ns = str(cmd.ext_fields.get("namespace") or "")
        table = self.kv.namespace(ns)
        if not table:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {clip_remark(ns)}", {})
        return cmd.response(ResponseCode.SUCCESS, None, {}, KVTable(table).encode())

    def kv_by_value(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(
            ResponseCode.QUERY_NOT_FOUND, f"request code {cmd.code} (KV config by value) is not kept here", {}
        )

    # -- write permission (Java RouteInfoManager.wipeWritePermOfBrokerByLock) ---------------

    def wipe_write_perm_of_broker(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return self._write_perm(conn, cmd, "wipe")

    def add_write_perm_of_broker(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return self._write_perm(conn, cmd, "add")

    def _write_perm(self, conn: Connection, cmd: RemotingCommand, op: str) -> RemotingCommand:
        # Java wipeWritePermOfBroker / addWritePermOfBroker: the same header, log and answer
        # (``wipeTopicCount`` / ``addTopicCount``)
        h = WipeWritePermOfBrokerRequestHeader.from_ext_fields(cmd.ext_fields)
        n = (self.route.wipe_write_perm_of_broker if op == "wipe" else self.route.add_write_perm_of_broker)(
            h.broker_name
        )
        self._rate_log.info(
            f"{op}-perm", "%s write perm of broker[%s], client: %s, %d", op, clip(h.broker_name), conn.remote_addr, n
        )
        return cmd.response(ResponseCode.SUCCESS, None, {f"{op}TopicCount": str(n)})

    # -- configuration (Java DefaultRequestProcessor.getConfig / updateConfig) --------------

    def get_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        props = self.controller.configuration.properties()
        if props.get("listenPort") == 0:  # an ephemeral port: show the bound one
            props["listenPort"] = self.controller.port
        return cmd.response(ResponseCode.SUCCESS, None, {}, format_properties(props).encode())

    async def update_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        body = cmd.body_bytes()
        if not body:
            return cmd.response(ResponseCode.SUCCESS, None, {})  # Java: nothing to update
        try:
            props = parse_properties(body)
        except ConfigError:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "string2Properties error", {})
        self._rate_log.info("update-config", "updateConfig called by %s: %s", conn.remote_addr, clip(props))
        try:
            await self.controller.configuration.update(props)
        except ConfigUpdateRefused as e:
            self._rate_log.warning(
                f"config-refused:{conn.remote_addr}",
                "namesrv: UPDATE_NAMESRV_CONFIG from %s refused: %s",
                conn.remote_addr,
                clip(e),
            )
            code = ResponseCode.NO_PERMISSION if e.black_list else ResponseCode.SYSTEM_ERROR
            return cmd.response(code, clip_remark(e), {})
        except OSError as e:
            self._rate_log.warning("config-persist", "namesrv: persisting the config failed: %s", e)
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"config updated in memory but writing "
                f"{self.controller.config.config_store_path} failed: {clip_remark(e)}",
                {},
            )
        return cmd.response(ResponseCode.SUCCESS, None, {})
