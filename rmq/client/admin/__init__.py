"""``rmq.Admin``: an asyncio admin client for rmq and Apache RocketMQ 4.x brokers (the
counterpart of Java's ``DefaultMQAdminExt``); ``rmq admin`` is built on it.

    async with Admin("127.0.0.1:9876") as admin:
        for addr in await admin.master_addrs():
            await admin.create_and_update_topic_config(addr, "TopicTest", read_queue_nums=4,
                                                       write_queue_nums=4)

Every method is one or a few remote calls, each with the admin's timeout (default 5 s); a
refusal raises :class:`AdminError` (a :class:`~rmq.errors.BrokerResponseError` with the
peer's code, remark and address); transport failures raise the remoting errors.
"""

from rmq.protocol.requests.acl import PlainAccessConfig

from ._acl import AclAdmin
from ._base import DEFAULT_TIMEOUT, NAMESRV_ADDR_ENV, AdminError, resolve_namesrv_addr
from ._brokers import BrokerAdmin
from ._consumers import ConsumerAdmin
from ._controller import ControllerAdmin
from ._messages import MessageAdmin
from ._ops import OpsAdmin
from ._topics import TopicAdmin
from ._trace import TraceAdmin

__all__ = ["Admin", "AdminError", "DEFAULT_TIMEOUT", "NAMESRV_ADDR_ENV", "PlainAccessConfig", "resolve_namesrv_addr"]


class Admin(TopicAdmin, TraceAdmin, MessageAdmin, ConsumerAdmin, BrokerAdmin, OpsAdmin, AclAdmin, ControllerAdmin):
    """The admin client: topics and clusters, message lookups, consumer groups and
    connections, broker configuration and statistics, name-server and store operations.

    Args:
        namesrv_addr: ``"host:port"``, ``"h1:p1;h2:p2"`` or a list; default ``$NAMESRV_ADDR``
            (``ValueError`` when neither is given).
        timeout: seconds per remote call (default 5.0, as mqadmin).
        access_key / secret_key: ACL credentials; every request is then signed (default None).
        tls: ``True`` (TLS, servers' certificates verified against the system's trust store),
            an ``ssl.SSLContext`` (own CA, client certificate), default None = plain TCP
            (Java ``-Dtls.enable=true``).
    """
