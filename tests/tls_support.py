"""A certificate authority made at test time (trustme), written to PEM files the daemons read.

No key is committed: every run makes a new CA, a server certificate for 127.0.0.1/localhost
and a client certificate, and a second CA the server does not trust (for "wrong client
certificate" cases).
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

import trustme


@dataclass
class Pki:
    dir: str
    ca_pem: str  # the CA certificate (clients and servers trust it)
    server_cert: str  # server chain
    server_key: str
    client_cert: str  # client chain signed by the CA
    client_key: str
    other_client_cert: str  # client chain from a CA nobody trusts
    other_client_key: str
    ca: trustme.CA

    def server_props(self, mode: str, *, need_client_auth: str = "none") -> dict[str, str]:
        """``tls.*`` properties of a server in ``mode``."""
        props = {
            "tls.server.mode": mode,
            "tls.server.certPath": self.server_cert,
            "tls.server.keyPath": self.server_key,
            "tls.server.need.client.auth": need_client_auth,
        }
        if need_client_auth != "none":
            props["tls.server.trustCertPath"] = self.ca_pem
        return props

    def server_args(self, mode: str, **kw: str) -> list[str]:
        """The same as ``--key=value`` daemon arguments (the broker trusts our CA for its
        registrations with the name server)."""
        props = self.server_props(mode, **kw)
        props["tls.client.trustCertPath"] = self.ca_pem
        return [f"--{k}={v}" for k, v in props.items()]

    def client_context(self, *, with_cert: bool = False, other_cert: bool = False) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_pem)
        if with_cert:
            ctx.load_cert_chain(self.client_cert, self.client_key)
        elif other_cert:
            ctx.load_cert_chain(self.other_client_cert, self.other_client_key)
        return ctx


def make_pki(directory: str) -> Pki:
    os.makedirs(directory, exist_ok=True)
    ca = trustme.CA()
    other = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client.test")
    stranger = other.issue_cert("stranger.test")

    def write(name: str, data: bytes) -> str:
        path = os.path.join(directory, name)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o600)
        return path

    return Pki(
        dir=directory,
        ca_pem=write("ca.pem", ca.cert_pem.bytes()),
        server_cert=write("server.pem", b"".join(b.bytes() for b in server.cert_chain_pems)),
        server_key=write("server.key", server.private_key_pem.bytes()),
        client_cert=write("client.pem", b"".join(b.bytes() for b in client.cert_chain_pems)),
        client_key=write("client.key", client.private_key_pem.bytes()),
        other_client_cert=write("other.pem", b"".join(b.bytes() for b in stranger.cert_chain_pems)),
        other_client_key=write("other.key", stranger.private_key_pem.bytes()),
        ca=ca,
    )
