"""TLS settings of the remoting layer, read as Apache RocketMQ reads them.

Java configures TLS with system properties (``TlsSystemConfig``) and an optional properties
file named by ``tls.config.file`` (``TlsHelper.extractTlsConfigFromFile``); rmq accepts the same
property names in ``broker.conf`` / ``namesrv.conf``, as ``--tls.server.mode=enforcing`` on the
command line, and in the file named by ``tls.config.file``. Values given directly win over the
file's (Java lets the file win over system properties; here the more specific source wins, as
``--key=value`` wins over ``broker.conf``).

Server side (``tls.server.mode``, Java ``TlsMode``):

* ``disabled``: plain TCP only; a TLS ClientHello is refused (the connection closes).
* ``permissive``: one port serves both; the first byte of a connection tells them apart (a
  ClientHello starts with record type 0x16, which as a RocketMQ length word would announce a
  frame of at least 369 MiB), as Java ``NettyRemotingServer.HandshakeHandler`` does.
* ``enforcing``: TLS only; a plain connection is closed with one rate-limited log line.

Defaults that differ from Java 4.9.8, and why:

* ``tls.server.mode`` defaults to ``permissive`` when ``tls.server.certPath`` is set and to
  ``disabled`` otherwise. Java defaults to ``permissive`` with ``tls.test.mode.enable=true``,
  which makes up a self-signed certificate and ignores the configured paths; rmq has no test
  mode (``tls.test.mode.enable`` is accepted and ignored): it serves TLS only with the
  certificate it is given.
* ``tls.client.authServer`` defaults to true: the client verifies the server's certificate
  (chain and host name) against ``tls.client.trustCertPath`` or the system's trust store. Java
  trusts any certificate unless told otherwise; set ``tls.client.authServer=false`` for that.
* Client certificates that the server asks for (``tls.server.need.client.auth`` optional or
  require) are always verified against ``tls.server.trustCertPath`` (Java verifies them only
  with ``tls.server.authClient=true``; that key is accepted and ignored).
* ``tls.server.need.client.auth=require`` with ``permissive``: plain-TCP clients are refused
  as in ``enforcing`` (Java serves them, so "require" would hold only for those who offer
  TLS). A plain client cannot present a certificate; an operator who requires one means it.
* ``tls.server.handshakeTimeoutSeconds`` (rmq only, default 10): a handshake that has not
  completed by then closes the connection. Java bounds it only by the idle timeout (120 s).

Every path is checked when the settings are built: a missing or unreadable file, a key that
does not match its certificate or a wrong password stops start-up with a :class:`ConfigError`
naming the property.
"""

from __future__ import annotations

import difflib
import enum
import os
import ssl
from collections.abc import Mapping

from rmq.common.lazy_dataclass import lazy_dataclass
from rmq.common.properties import ConfigError, load_properties

__all__ = [
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "TLS_PROPERTIES",
    "TLS_RECORD_HANDSHAKE",
    "ClientAuth",
    "TlsMode",
    "TlsServerOptions",
    "TlsSettings",
    "client_context",
    "resolve_client_tls",
    "split_tls_properties",
]

#: The first byte of a TLS ClientHello (record type ``handshake``; Java ``HANDSHAKE_MAGIC_CODE``).
TLS_RECORD_HANDSHAKE = 0x16
#: Seconds a TLS handshake may take on the server before the connection is closed.
DEFAULT_HANDSHAKE_TIMEOUT = 10.0


class TlsMode(enum.Enum):
    """Java ``TlsMode``: what a server does with TLS and plain connections."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


class ClientAuth(enum.Enum):
    """Netty ``ClientAuth``: whether the server asks for a client certificate."""

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


# Property name → attribute of TlsSettings (Java TlsSystemConfig's names).
TLS_PROPERTIES: dict[str, str] = {
    "tls.server.mode": "server_mode",
    "tls.enable": "enable",
    "tls.config.file": "config_file",
    "tls.test.mode.enable": "test_mode_enable",
    "tls.server.need.client.auth": "server_need_client_auth",
    "tls.server.keyPath": "server_key_path",
    "tls.server.keyPassword": "server_key_password",
    "tls.server.certPath": "server_cert_path",
    "tls.server.authClient": "server_auth_client",
    "tls.server.trustCertPath": "server_trust_cert_path",
    "tls.server.handshakeTimeoutSeconds": "handshake_timeout",
    "tls.client.keyPath": "client_key_path",
    "tls.client.keyPassword": "client_key_password",
    "tls.client.certPath": "client_cert_path",
    "tls.client.authServer": "client_auth_server",
    "tls.client.trustCertPath": "client_trust_cert_path",
}
_BY_LOWER = {k.lower(): k for k in TLS_PROPERTIES}


def split_tls_properties(props: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``(other properties, tls.* properties)``: the daemons give the second to
    :meth:`TlsSettings.from_properties` and the first to their config dataclasses."""
    rest: dict[str, str] = {}
    tls: dict[str, str] = {}
    for key, value in props.items():
        (tls if key.lower().startswith("tls.") else rest)[key] = value
    return rest, tls


def _bool(key: str, value: str) -> bool:
    low = value.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"bad value for {key}: {value!r} (expected true or false)")


def _readable(key: str, path: str) -> str:
    path = os.path.expanduser(path)
    if not os.path.isfile(path):
        raise ConfigError(f"{key}: no such file {path!r}")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{key}: cannot read {path!r} (permission denied)")
    return path


@lazy_dataclass(slots=True)
class TlsServerOptions:
    """What a :class:`~rmq.remoting.server.RemotingServer` needs to serve TLS.

    Attributes:
        mode: :class:`TlsMode` (DISABLED serves plain TCP only).
        context: the server ``ssl.SSLContext``; required unless DISABLED.
        handshake_timeout: seconds a handshake may take (default 10).
        require_client_cert: ``tls.server.need.client.auth=require`` (default False): then a
            PERMISSIVE server refuses plain-TCP clients too, which could never show a
            certificate (Java's permissive mode serves them; see the module docstring).
    """

    mode: TlsMode
    context: ssl.SSLContext | None = None
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    require_client_cert: bool = False

    def __post_init__(self) -> None:
        if self.mode is not TlsMode.DISABLED and self.context is None:
            raise ValueError(f"tls.server.mode={self.mode.value} needs a server SSL context")
        if not self.handshake_timeout > 0:
            raise ValueError(f"handshake_timeout must be > 0, got {self.handshake_timeout}")


@lazy_dataclass(slots=True)
class TlsSettings:
    """The ``tls.*`` properties of one daemon or client (Java ``TlsSystemConfig``).

    Build it with :meth:`from_properties`; every attribute is the property of the same name in
    :data:`TLS_PROPERTIES`. Defaults: no paths, ``server_mode`` None (permissive when a server
    certificate is set, else disabled), ``enable`` None (TLS to name servers when the server
    mode is enforcing, Java ``BrokerStartup``), ``server_need_client_auth`` ``none``,
    ``client_auth_server`` True, ``handshake_timeout`` 10 s.
    """

    server_mode: str | None = None
    enable: bool | None = None
    config_file: str | None = None
    test_mode_enable: bool = False
    server_need_client_auth: str = "none"
    server_key_path: str | None = None
    server_key_password: str | None = None
    server_cert_path: str | None = None
    server_auth_client: bool = False
    server_trust_cert_path: str | None = None
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    client_key_path: str | None = None
    client_key_password: str | None = None
    client_cert_path: str | None = None
    client_auth_server: bool = True
    client_trust_cert_path: str | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TlsSettings:
        """Settings from ``tls.*`` properties (and the file ``tls.config.file`` names, whose
        values the given ones override). :class:`ConfigError` names an unknown ``tls.*`` key
        (with a suggestion), a bad value, or a file that cannot be read."""
        merged: dict[str, str] = {}
        file_key = next((k for k in props if k.lower() == "tls.config.file"), None)
        if file_key is not None and props[file_key].strip():
            path = _readable("tls.config.file", props[file_key].strip())
            merged.update({k: v for k, v in load_properties(path).items() if k.lower() != "tls.config.file"})
        merged.update(props)
        settings = cls()
        for key, value in merged.items():
            name = _BY_LOWER.get(key.lower())
            if name is None:
                close = difflib.get_close_matches(key, list(TLS_PROPERTIES), n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]}?" if close else ""
                raise ConfigError(f"unknown config key {key!r}{hint}")
            settings._set(name, value)
        settings.check()
        return settings

    def _set(self, key: str, value: str) -> None:
        attr = TLS_PROPERTIES[key]
        v = value.strip()
        if attr in ("enable", "test_mode_enable", "server_auth_client", "client_auth_server"):
            setattr(self, attr, _bool(key, v))
        elif attr == "handshake_timeout":
            try:
                self.handshake_timeout = float(v)
            except ValueError:
                raise ConfigError(f"bad value for {key}: {value!r} (expected a number of seconds)") from None
        elif attr == "server_mode":
            self.server_mode = v.lower() or None
        elif attr == "server_need_client_auth":
            self.server_need_client_auth = v.lower()
        else:
            setattr(self, attr, v or None)

    def check(self) -> None:
        """Check the values (not yet the files): :class:`ConfigError` naming the property."""
        if self.server_mode is not None and self.server_mode not in {m.value for m in TlsMode}:
            raise ConfigError(
                f"bad value for tls.server.mode: {self.server_mode!r} (expected disabled, permissive or enforcing)"
            )
        if self.server_need_client_auth not in {c.value for c in ClientAuth}:
            raise ConfigError(
                f"bad value for tls.server.need.client.auth: {self.server_need_client_auth!r} "
                "(expected none, optional or require)"
            )
        if not 0.1 <= self.handshake_timeout <= 600:
            raise ConfigError(
                f"bad value for tls.server.handshakeTimeoutSeconds: {self.handshake_timeout!r} (expected 0.1..600 s)"
            )

    @property
    def mode(self) -> TlsMode:
        """The server mode: as set, else permissive with a certificate and disabled without."""
        if self.server_mode is not None:
            return TlsMode(self.server_mode)
        return TlsMode.PERMISSIVE if self.server_cert_path else TlsMode.DISABLED

    @property
    def client_enabled(self) -> bool:
        """Whether this daemon's own client (the broker's registrations) uses TLS: ``tls.enable``
        if set, else whether the server enforces TLS (Java ``BrokerStartup``)."""
        return self.enable if self.enable is not None else self.mode is TlsMode.ENFORCING

    def server_options(self) -> TlsServerOptions:
        """The server side, files loaded and checked. :class:`ConfigError` names the property
        of a missing file, a key that does not fit, or a missing certificate."""
        mode = self.mode
        if mode is TlsMode.DISABLED:
            return TlsServerOptions(mode, None, self.handshake_timeout)
        if not self.server_cert_path:
            raise ConfigError(
                f"tls.server.mode={mode.value} needs tls.server.certPath (the server's certificate chain in PEM)"
            )
        cert = _readable("tls.server.certPath", self.server_cert_path)
        key = _readable("tls.server.keyPath", self.server_key_path) if self.server_key_path else None
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        _load_chain(ctx, cert, key, self.server_key_password, "tls.server")
        auth = ClientAuth(self.server_need_client_auth)
        if auth is not ClientAuth.NONE:
            if self.server_trust_cert_path:
                trust = _readable("tls.server.trustCertPath", self.server_trust_cert_path)
                try:
                    ctx.load_verify_locations(cafile=trust)
                except ssl.SSLError as e:
                    raise ConfigError(
                        f"tls.server.trustCertPath: {trust!r} holds no usable certificate: {e.reason or e}"
                    ) from None
            else:
                raise ConfigError(
                    f"tls.server.need.client.auth={auth.value} needs tls.server.trustCertPath "
                    "(the CA certificates client certificates are checked against)"
                )
            ctx.verify_mode = ssl.CERT_REQUIRED if auth is ClientAuth.REQUIRE else ssl.CERT_OPTIONAL
        return TlsServerOptions(mode, ctx, self.handshake_timeout, require_client_cert=auth is ClientAuth.REQUIRE)

    def client_context(self) -> ssl.SSLContext:
        """The client side (``tls.client.*``), files loaded and checked."""
        return client_context(
            trust_cert_path=self.client_trust_cert_path,
            cert_path=self.client_cert_path,
            key_path=self.client_key_path,
            key_password=self.client_key_password,
            auth_server=self.client_auth_server,
        )


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str | None, password: str | None, prefix: str) -> None:
    try:
        ctx.load_cert_chain(cert, key, password or None)
    except ssl.SSLError as e:
        what = f"{prefix}.keyPath" if key else f"{prefix}.certPath"
        raise ConfigError(
            f"{prefix}.certPath / {what}: cannot load the certificate and key ({e.reason or e}; "
            f"a key that does not match the certificate, or a wrong {prefix}.keyPassword?)"
        ) from None


def client_context(
    *,
    trust_cert_path: str | None = None,
    cert_path: str | None = None,
    key_path: str | None = None,
    key_password: str | None = None,
    auth_server: bool = True,
) -> ssl.SSLContext:
    """A client ``ssl.SSLContext`` (Java ``TlsHelper.buildSslContext(true)``).

    Args:
        trust_cert_path: PEM CA certificates the server's certificate must chain to (default
            None: the system's trust store, ``SSL_CERT_FILE`` honoured).
        cert_path / key_path / key_password: this client's certificate, for servers that ask
            (default none).
        auth_server: verify the server's certificate and host name (default True); False
            encrypts without knowing whom to (Java's default).

    Raises:
        ConfigError: a file is missing or does not load (naming the ``tls.client.*`` property).
    """
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if auth_server:
        if trust_cert_path:
            trust = _readable("tls.client.trustCertPath", trust_cert_path)
            try:
                ctx.load_verify_locations(cafile=trust)
            except ssl.SSLError as e:
                raise ConfigError(
                    f"tls.client.trustCertPath: {trust!r} holds no usable certificate: {e.reason or e}"
                ) from None
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_path:
        cert = _readable("tls.client.certPath", cert_path)
        key = _readable("tls.client.keyPath", key_path) if key_path else None
        _load_chain(ctx, cert, key, key_password, "tls.client")
    elif key_path:
        raise ConfigError("tls.client.keyPath is set without tls.client.certPath")
    return ctx


def resolve_client_tls(tls: bool | ssl.SSLContext | None) -> ssl.SSLContext | None:
    """The SDK's ``tls=`` argument as a context: None/False plain TCP, True a default context
    (server certificate and host name verified against the system's trust store), or the
    caller's own ``ssl.SSLContext`` (own CA, client certificate)."""
    if tls is None or tls is False:
        return None
    if tls is True:
        return client_context()
    if isinstance(tls, ssl.SSLContext):
        return tls
    raise TypeError(f"tls must be a bool or an ssl.SSLContext, got {type(tls).__name__}")
