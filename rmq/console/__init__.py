"""``rmq console``: a web console for rmq and Apache RocketMQ 4.x clusters (what
rocketmq-dashboard users use), built on :class:`rmq.client.admin.Admin`.

    users = {"alice": hash_password("alice's password")}      # rmq.console.auth
    server = ConsoleServer(ConsoleConfig("127.0.0.1:9876", port=8080, users=users))
    await server.start()          # http://127.0.0.1:8080/, log in as alice
    ...
    await server.stop()

Pages: cluster (brokers, versions, TPS, disk, runtime info, config), topics (filters, create,
update, delete, per-queue status, route, consuming groups with lag, test message), consumer
groups (lag and TPS, per-queue progress including retry, connections, running info, reset
offset, skip accumulated, create, update, delete), producers, messages (by time range, key or
id; detail with consume status per group; resend to a group), dead letters (browse, resend)
and a dashboard of broker and topic TPS over the last hour. The page is plain HTML, CSS and
script shipped in the package (``static/``); it builds every element from text, so nothing a
broker returns is ever read as markup. Every API call needs a login; requests for a host name
the console does not answer to (DNS rebinding) and writes without the session's CSRF token are
refused (see :mod:`rmq.console.server`).
"""

from .server import ConsoleConfig, ConsoleServer

__all__ = ["ConsoleConfig", "ConsoleServer"]
