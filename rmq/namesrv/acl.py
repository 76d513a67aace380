"""The name server's optional ACL (``aclEnable`` on the name server; not in Java 4.9.8, whose
name server answers anyone).

Reads stay open to every client (routes, cluster info, KV reads, GET_NAMESRV_CONFIG), so
producers, consumers and Java tools without keys keep working. The write codes
(:data:`WRITE_CODES`: broker registration and unregistration, KV writes,
UPDATE_NAMESRV_CONFIG, write-permission changes, topic deletion) need what a broker's
admin-only codes need: a request from a global white address, or from an account's white
address, or signed by an account with ``admin: true``. The accounts are the broker's
(``<rocketmqHome>/conf/plain_acl.yml`` and ``conf/acl/*.yml``, the same format and the same
reader: :class:`rmq.remoting.plain_acl.PlainAccounts`). A broker signs its registrations with
its ``namesrvAccessKey`` / ``namesrvSecretKey`` properties.
"""

from __future__ import annotations

from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.plain_acl import AclError, PlainAccounts

__all__ = ["NamesrvAcl", "WRITE_CODES"]

#: The codes that change the name server's state.
WRITE_CODES = frozenset(
    (
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.UPDATE_NAMESRV_CONFIG,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
    )
)

_ORIGIN = "org.apache.rocketmq.namesrv.processor.DefaultRequestProcessor.processRequest(rmq aclEnable)"


class NamesrvAcl(PlainAccounts):
    """The accounts of ``home`` guarding :data:`WRITE_CODES` (see the module docstring).

    Args:
        home: ``rocketmqHome`` (the accounts are in ``<home>/conf/plain_acl.yml``).
        watch_interval: seconds between two looks at the files (default 0.5).
    """

    def check(self, cmd: RemotingCommand, remote_host: str) -> AclError | None:
        """None when ``cmd`` may be processed, else the refusal."""
        return self.admin_only(cmd, remote_host, WRITE_CODES, "the name server", _ORIGIN)
