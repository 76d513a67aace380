"""Plain ACL 1.0 accounts, as Apache RocketMQ 4.9.8 keeps them (``acl`` module), shared by the
broker (rmq.broker.acl: per-request resources and permissions) and the name server
(rmq.namesrv.acl: its write codes).

* :class:`PlainAccounts` (Java ``PlainPermissionManager``'s loading half): the accounts and
  global white addresses of ``$ROCKETMQ_HOME/conf/plain_acl.yml`` and of every ``*.yml`` /
  ``*.yaml`` under ``$ROCKETMQ_HOME/conf/acl/`` (an accessKey belongs to the first file that
  names it), read with PyYAML ``safe_load``. :meth:`PlainAccounts.watch` polls the files'
  hashes (Java ``AclFileWatchService``, every 500 ms) off the event loop and reloads on change;
  a file that does not parse, or names a bad address or permission, is reported once and the
  last good configuration stays in force. :meth:`PlainAccounts.authenticate` (Java
  ``PlainPermissionManager.validate`` up to the permissions): the global white list, the
  accessKey, the account's white address, the HMAC-SHA1 signature (:mod:`rmq.remoting.acl`).
* The admin updates (UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG,
  UPDATE_GLOBAL_WHITE_ADDRS_CONFIG) rewrite the yml as Java's ``updateAccessConfig`` /
  ``deleteAccessConfig`` / ``updateGlobalWhiteAddrsConfig`` do, bumping its ``dataVersion``.
* :func:`acl_guard` puts a daemon's request handler behind a checker; :func:`refuse_acl`
  answers a refusal as Java does: ``AclException.toString()`` and the first stack frame
  (``RemotingHelper.exceptionSimpleDesc``).

No secret key is ever logged: log lines name the accessKey only.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import inspect
import ipaddress
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rmq.common.constants import MixAll
from rmq.common.log import RateLimitedLog, clip
from rmq.common.properties import ConfigError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import FLAG_ONEWAY, RemotingCommand
from rmq.remoting.acl import ACCESS_KEY, SIGNATURE, Signer, combine_request_content

__all__ = [
    "AclChecker",
    "AclConfigError",
    "AclError",
    "OFF_LOOP_BODY_BYTES",
    "Permission",
    "PlainAccounts",
    "acl_guard",
    "acl_home",
    "check_keys",
    "refuse_acl",
    "remote_address_strategy",
]

log = logging.getLogger("rmq.acl")
_rlog = RateLimitedLog(log)

# Java RemotingHelper.exceptionSimpleDesc(e): e.toString() + ", " + the first stack frame.
_EXC = "org.apache.rocketmq.acl.common.AclException"
_VALIDATE = "org.apache.rocketmq.acl.plain.PlainPermissionManager.validate(PlainPermissionManager.java:{})"

DEFAULT_ACL_FILE = os.path.join("conf", "plain_acl.yml")
ACL_DIR = os.path.join("conf", "acl")
# Java AclConstants: keys of the yml.
_GLOBAL_WHITE = "globalWhiteRemoteAddresses"
_ACCOUNTS = "accounts"
_DATA_VERSION = "dataVersion"
# Java AclConstants.ACCESS_KEY_MIN_LENGTH / SECRET_KEY_MIN_LENGTH: keys must be longer.
_KEY_MIN_LENGTH = 6


class AclError(Exception):
    """A refused request (Java ``AclException``); :attr:`remark` is what Java answers."""

    def __init__(self, message: str, origin: str) -> None:
        super().__init__(message)
        self.message = message
        self.origin = origin

    @property
    def remark(self) -> str:
        return f"{_EXC}: {self.message}, {self.origin}"


class AclConfigError(ConfigError):
    """A plain_acl.yml (or an admin update) that cannot be used; the text says why (a
    ``ConfigError``: at start the daemon exits 2 with it)."""


class Permission:
    """Java ``org.apache.rocketmq.acl.common.Permission``: bits and the admin-only codes."""

    DENY = 1
    ANY = 1 << 1
    PUB = 1 << 2
    SUB = 1 << 3
    # Java Permission.ADMIN_CODE: only accounts with ``admin: true`` may send these. Java 4.9.8
    # leaves the ACL admin codes open to every account, so any account could make itself an
    # admin (50) or read every secret (54): here those need admin too. GET_BROKER_CLUSTER_ACL_INFO
    # (52, data versions only) stays open as in Java. CLEAN_UNUSED_TOPIC (316) is not in Java
    # 4.9.8's set (nor has 5.x's ACL 2.0 a header annotation for it), yet it destroys consume
    # queues with no topic named, which is DELETE_TOPIC_IN_BROKER's power over every topic the
    # broker holds no config for: here it needs admin as DELETE_TOPIC_IN_BROKER does.
    ADMIN_CODE = frozenset(
        (
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            RequestCode.UPDATE_BROKER_CONFIG,
            RequestCode.DELETE_TOPIC_IN_BROKER,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            RequestCode.DELETE_SUBSCRIPTIONGROUP,
            RequestCode.CLEAN_UNUSED_TOPIC,
            # Java 5 ACL 2.0 checks SET_MESSAGE_REQUEST_MODE as a cluster-level admin action.
            RequestCode.SET_MESSAGE_REQUEST_MODE,
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
            RequestCode.DELETE_ACL_CONFIG,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
            RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
        )
    )

    @staticmethod
    def check(needed: int, owned: int) -> bool:
        """Java ``Permission.checkPermission``."""
        if owned & Permission.DENY:
            return False
        if needed & Permission.ANY:
            return bool(owned & (Permission.PUB | Permission.SUB))
        return bool(needed & owned)

    @staticmethod
    def parse(text: Any) -> int:
        """Java ``Permission.parsePermFromString``: anything unknown is DENY."""
        if text is None:
            return Permission.DENY
        t = str(text).strip()
        if t == "PUB":
            return Permission.PUB
        if t == "SUB":
            return Permission.SUB
        if t in ("PUB|SUB", "SUB|PUB"):
            return Permission.PUB | Permission.SUB
        return Permission.DENY

    @staticmethod
    def check_resource_perms(resources: Iterable[str] | None) -> None:
        """Java ``Permission.checkResourcePerms`` (admin updates): ``Res=PUB|SUB`` items."""
        for resource in resources or ():
            items = [i for i in str(resource).split("=") if i]
            if len(items) != 2:
                raise AclConfigError(
                    f"Parse Resource format error for {resource}.\n"
                    "The expected resource format is 'Res=Perm'. For example: topicA=SUB"
                )
            if items[1].strip() != "DENY" and Permission.parse(items[1]) == Permission.DENY:
                raise AclConfigError(
                    f"Parse resource permission error for {resource}.\n"
                    "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'."
                )


# ============================================================================ white addresses
# Java RemoteAddressStrategyFactory: blank (never), "*" (always), "a.b.c.{1,2}" and comma
# lists (a set), "*" or "x-y" in one position (a range, the rest of the address ignored as in
# Java), one address.


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    host = host.strip().strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


_ip_cached = functools.lru_cache(maxsize=4096)(_ip)
Strategy = Callable[[str], bool]


def _never(host: str) -> bool:
    return False


def _always(host: str) -> bool:
    return True


def _bad(addr: str) -> AclConfigError:
    return AclConfigError(f"Netaddress examine Exception netaddress is {addr}")


def _one(addr: str) -> Strategy:
    want = _ip(addr)
    if want is None:
        raise _bad(addr)

    def match(host: str) -> bool:
        return _ip_cached(host) == want

    return match


def _multiple(addrs: Iterable[str]) -> Strategy:
    wanted = set()
    for a in addrs:
        ip = _ip(a)
        if ip is None:
            raise _bad(a.strip())
        wanted.add(ip)

    def match(host: str) -> bool:
        return _ip_cached(host) in wanted

    return match


def _range_part(value: str, hi: int, base: int, addr: str) -> tuple[int, int] | None:
    value = value.strip()
    if value == "*":
        return 0, hi
    if "-" in value:
        if value.startswith("-"):
            raise AclConfigError(f"RangeRemoteAddressStrategy netaddress examine scope Exception value {value} ")
        try:
            lo_s, hi_s = [v for v in value.split("-") if v]
            start, end = int(lo_s, base), int(hi_s, base)
        except ValueError:
            raise _bad(addr) from None
        if not (0 <= start <= end <= hi):
            raise AclConfigError(
                f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {start} , end is {end}"
            )
        return start, end
    return None


def _range4(addr: str) -> Strategy:
    parts = addr.split(".")
    if len(parts) != 4:
        raise _bad(addr)
    for i in (1, 2, 3):
        rng = _range_part(parts[i], 255, 10, addr)
        if rng is not None:
            break
    else:
        raise _bad(addr)
    try:
        head = tuple(int(p) for p in parts[:i])
    except ValueError:
        raise _bad(addr) from None
    if not all(0 <= h <= 255 for h in head):
        raise _bad(addr)
    start, end = rng

    def match(host: str) -> bool:
        ip = _ip_cached(host)
        if not isinstance(ip, ipaddress.IPv4Address):
            return False
        octets = ip.packed
        return tuple(octets[:i]) == head and start <= octets[i] <= end

    return match


def _range6(addr: str) -> Strategy:
    # '*' only at the end; a range in the last group (or the one before a final '*').
    groups = addr.split(":")
    tail = 1
    if groups[-1].strip() == "*" and len(groups) > 1 and "-" in groups[-2]:
        tail = 2
    if "*" in addr[:-1]:
        raise AclConfigError(f"Netaddress examine scope Exception netaddress is {addr}")
    rng = _range_part(groups[-tail], 0xFFFF, 16, addr)
    if rng is None:
        raise _bad(addr)
    prefix = ":".join(groups[:-tail])
    n = 8 - tail  # groups before the range position
    if "::" in prefix:
        left, _, right = prefix.partition("::")
        lg, rg = (left.split(":") if left else []), (right.split(":") if right else [])
        texts = lg + ["0"] * (n - len(lg) - len(rg)) + rg
    else:
        texts = prefix.split(":")
    try:
        head_groups = [int(t, 16) for t in texts]
    except ValueError:
        raise _bad(addr) from None
    if len(head_groups) != n or not all(0 <= g <= 0xFFFF for g in head_groups):
        raise _bad(addr)
    start, end = rng

    def match(host: str) -> bool:
        ip = _ip_cached(host)
        if not isinstance(ip, ipaddress.IPv6Address):
            return False
        g = [int(x, 16) for x in ip.exploded.split(":")]
        return g[:n] == head_groups and start <= g[n] <= end

    return match


def remote_address_strategy(addr: Any) -> Strategy:
    """A matcher ``host → bool`` for one white-address expression (Java
    ``RemoteAddressStrategyFactory.getRemoteAddressStrategy``).

    Raises:
        AclConfigError: the expression is not one of Java's forms.
    """
    if addr is None or not str(addr).strip():
        return _never
    addr = str(addr).strip()
    if addr in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return _always
    if addr.endswith("}"):
        brace = addr.rfind("{")
        if brace < 0:
            raise AclConfigError(f"MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress {addr}")
        base = addr[:brace]
        if ":" not in addr and len(addr.split(".")) < 4:
            raise AclConfigError(f"MultipleRemoteAddressStrategy has got a/some wrong format IP(s) {addr}")
        return _multiple(base + s for s in addr[brace + 1 : -1].split(",") if s)
    if "," in addr:
        return _multiple(s for s in addr.split(",") if s)
    if "*" in addr or "-" in addr:
        return _range6(addr) if ":" in addr else _range4(addr)
    return _one(addr)


# ============================================================================ configuration


@dataclass(slots=True)
class _Account:
    access_key: str
    secret_key: str
    white: Strategy
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: dict[str, int]  # topic, or %RETRY%group → bits
    signer: Signer  # HMAC-SHA1 keyed with the secret


@dataclass(slots=True)
class _DataVersion:
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    counter: int = 0

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}


@dataclass(slots=True)
class _State:
    """One loaded configuration; replaced whole on reload, so a check sees one version."""

    files: list[str]
    global_white: list[Strategy]
    accounts: dict[str, _Account]
    key_file: dict[str, str]  # accessKey → the file that defines it
    versions: dict[str, _DataVersion]
    fingerprint: dict[str, str]  # path → sha256 of the content read


def _str_or_none(v: Any) -> str | None:
    if v is None:
        return None
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)


def _as_list(v: Any, what: str, path: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise AclConfigError(f"{path}: {what} must be a list, not {type(v).__name__}")
    return v


def check_keys(access_key: str | None, secret_key: str | None) -> None:
    """Java ``PlainPermissionManager.checkPlainAccessConfig`` (the message names the secret as
    Java's does; it goes to the requester, never to the log)."""
    if (
        access_key is None
        or secret_key is None
        or len(access_key) <= _KEY_MIN_LENGTH
        or len(secret_key) <= _KEY_MIN_LENGTH
    ):
        raise AclConfigError(
            f"The accessKey={access_key} and secretKey={secret_key} cannot be null and length should longer than 6"
        )


def _build_account(raw: Any, path: str) -> _Account:
    """Java ``buildPlainAccessResource`` for one ``accounts`` item."""
    if not isinstance(raw, dict):
        raise AclConfigError(f"{path}: each account must be a mapping, not {type(raw).__name__}")
    ak, sk = _str_or_none(raw.get("accessKey")), _str_or_none(raw.get("secretKey"))
    try:
        check_keys(ak, sk)
    except AclConfigError:
        # Java's text names the secret: say which account without it.
        raise AclConfigError(
            f"{path}: account accessKey={ak}: accessKey and secretKey must be longer than 6 characters"
        ) from None
    assert ak is not None and sk is not None
    perms: dict[str, int] = {}
    for is_topic, key in ((False, "groupPerms"), (True, "topicPerms")):
        for item in _as_list(raw.get(key), key, path):
            parts = [p for p in str(item).split("=") if p]
            if len(parts) != 2:
                raise AclConfigError(f"Parse resource permission failed for {'topic' if is_topic else 'group'}:{item}")
            name = parts[0].strip()
            perms[name if is_topic else MixAll.get_retry_topic(name)] = Permission.parse(parts[1])
    try:
        white = remote_address_strategy(raw.get("whiteRemoteAddress"))
    except AclConfigError as e:
        raise AclConfigError(f"{path}: account {ak}: {e}") from None
    admin = raw.get("admin")
    return _Account(
        access_key=ak,
        secret_key=sk,
        white=white,
        admin=admin is True or str(admin).lower() == "true",
        default_topic_perm=Permission.parse(raw.get("defaultTopicPerm")),
        default_group_perm=Permission.parse(raw.get("defaultGroupPerm")),
        perms=perms,
        signer=Signer(sk),
    )


def _read_yaml(path: str) -> tuple[Any, str]:
    with open(path, "rb") as f:
        raw = f.read()
    digest = hashlib.sha256(raw).hexdigest()
    import yaml  # loaded with the first ACL file: a broker without aclEnable never reads one

    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        # PyYAML's text quotes the offending line, which may hold a secretKey: say where only.
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise AclConfigError(
            f"{path}: not valid YAML{where}: {getattr(e, 'problem', None) or type(e).__name__}"
        ) from None
    if data is not None and not isinstance(data, dict):
        raise AclConfigError(f"{path}: the top level must be a mapping, not {type(data).__name__}")
    return data, digest


def acl_home(rocketmq_home: str | None) -> str:
    """Java's ``rocketmq.home.dir`` / ``ROCKETMQ_HOME``: the broker property first, then the
    environment. Raises ``AclConfigError`` when neither is set."""
    home = rocketmq_home or os.environ.get("ROCKETMQ_HOME")
    if not home:
        raise AclConfigError(
            "aclEnable=true needs the rocketmqHome property or the ROCKETMQ_HOME environment "
            "variable (the accounts are read from <home>/conf/plain_acl.yml)"
        )
    return os.path.abspath(home)


# ============================================================================ the accounts


class PlainAccounts:
    """The plain ACL accounts of one daemon (see the module docstring).

    Args:
        home: ``rocketmqHome``; the accounts are in ``<home>/conf/plain_acl.yml`` (created empty
            when missing, as Java does) and ``<home>/conf/acl/**.yml``.
        watch_interval: seconds between two looks at the files (default 0.5).
    """

    def __init__(self, home: str, watch_interval: float = 0.5) -> None:
        self.home = os.path.abspath(home)
        self.default_file = os.path.join(self.home, DEFAULT_ACL_FILE)
        self.acl_dir = os.path.join(self.home, ACL_DIR)
        self.watch_interval = watch_interval
        self._state: _State | None = None
        self._last_error: str | None = None
        self._update_lock = asyncio.Lock()
        self.reloads = 0  # configurations taken into force after the first (for tests and logs)

    # ------------------------------------------------------------------ loading (blocking)

    def _files(self) -> list[str]:
        files: list[str] = []
        if os.path.isdir(self.acl_dir):
            for root, dirs, names in os.walk(self.acl_dir):
                dirs.sort()
                for n in sorted(names):
                    if n.endswith((".yml", ".yaml")):
                        files.append(os.path.join(root, n))
        if os.path.exists(self.default_file) and self.default_file not in files:
            files.append(self.default_file)
        return files

    def read(self) -> _State:
        """Read every ACL file into a new state (blocking: run it off the loop).

        Raises:
            AclConfigError: a file cannot be read or used.
        """
        if not os.path.exists(self.default_file):
            # Java assureAclConfigFilesExist: the default file holds the global white list.
            try:
                os.makedirs(os.path.dirname(self.default_file), exist_ok=True)
                open(self.default_file, "a").close()
            except OSError as e:
                raise AclConfigError(f"cannot create {self.default_file}: {e}") from None
        files = self._files()
        global_white: list[Strategy] = []
        accounts: dict[str, _Account] = {}
        key_file: dict[str, str] = {}
        versions: dict[str, _DataVersion] = {}
        fingerprint: dict[str, str] = {}
        for path in files:
            try:
                data, digest = _read_yaml(path)
            except OSError as e:
                raise AclConfigError(f"{path}: cannot be read: {e}") from None
            fingerprint[path] = digest
            version = _DataVersion()
            versions[path] = version
            if not data:
                continue
            for addr in _as_list(data.get(_GLOBAL_WHITE), _GLOBAL_WHITE, path):
                try:
                    global_white.append(remote_address_strategy(addr))
                except AclConfigError as e:
                    raise AclConfigError(f"{path}: {_GLOBAL_WHITE}: {e}") from None
            for raw in _as_list(data.get(_ACCOUNTS), _ACCOUNTS, path):
                account = _build_account(raw, path)
                if account.access_key in key_file:
                    log.warning(
                        "ACL: accessKey %s is repeated in %s; %s keeps it",
                        account.access_key,
                        path,
                        key_file[account.access_key],
                    )
                    continue
                accounts[account.access_key] = account
                key_file[account.access_key] = path
            dv = _as_list(data.get(_DATA_VERSION), _DATA_VERSION, path)
            if dv and isinstance(dv[0], dict):
                try:
                    version.timestamp = int(dv[0].get("timestamp", version.timestamp))
                    version.counter = int(dv[0].get("counter", 0))
                except (TypeError, ValueError):
                    pass
        return _State(files, global_white, accounts, key_file, versions, fingerprint)

    def load(self) -> None:
        """Load now (blocking; at start). Raises ``AclConfigError`` on a bad file."""
        self._install(self.read())

    def _install(self, state: _State) -> None:
        first = self._state is None
        self._state = state
        self._last_error = None
        if not first:
            self.reloads += 1
        log.info(
            "ACL: %d accounts, %d global white addresses from %s",
            len(state.accounts),
            len(state.global_white),
            ", ".join(state.files),
        )

    def _fingerprint(self) -> dict[str, str]:
        out = {}
        for path in self._files():
            try:
                with open(path, "rb") as f:
                    out[path] = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                out[path] = ""
        return out

    def _reload_if_changed(self) -> _State | None:
        """Blocking: a new state when the files changed (None when not)."""
        state = self._state
        if state is not None and self._fingerprint() == state.fingerprint:
            return None
        return self.read()

    async def watch(self) -> None:
        """Poll the ACL files every ``watch_interval`` s until cancelled (Java
        ``AclFileWatchService``); reads and hashes run in a worker thread."""
        while True:
            await asyncio.sleep(self.watch_interval)
            try:
                async with self._update_lock:
                    new = await asyncio.to_thread(self._reload_if_changed)
                    if new is not None:
                        self._install(new)
                    else:
                        self._last_error = None  # back to the state in force: report anew next time
            except AclConfigError as e:
                text = str(e)
                if text != self._last_error:  # once per distinct problem
                    self._last_error = text
                    log.error(
                        "ACL: the changed configuration is not used, the previous one stays in force: %s", clip(text)
                    )
            except Exception:  # noqa: BLE001 - the watcher must outlive one bad look
                _rlog.error("acl-watch", "ACL: watching %s failed", self.default_file, exc_info=True)

    # ------------------------------------------------------------------ who sent it (hot path)

    def admin_only(
        self, cmd: RemotingCommand, remote_host: str, codes: frozenset[int], where: str, origin: str
    ) -> AclError | None:
        """The name server's and the controller's rule: a request whose code is in ``codes``
        needs a white address or an account with ``admin: true``; any other passes. None when
        ``cmd`` may be processed, else the refusal (naming ``where`` and ``origin``)."""
        if cmd.code not in codes:
            return None
        account = self.authenticate(cmd, remote_host)
        if account is None or isinstance(account, AclError):
            return account
        if not account.admin:
            return AclError(
                f"Need admin permission for request code={cmd.code} on {where}, but "
                f"accessKey={account.access_key} is not",
                origin,
            )
        return None

    def authenticate(self, cmd: RemotingCommand, remote_host: str) -> _Account | AclError | None:
        """Who sent ``cmd`` from ``remote_host`` (Java ``PlainPermissionManager.validate`` before
        ``checkPerm``): None when a global white address or the account's white address lets
        it in unchecked, the account when the signature is its, else the refusal."""
        state = self._state
        if state is None:
            return AclError("ACL configuration is not loaded", _VALIDATE.format(664))
        for white in state.global_white:
            if white(remote_host):
                return None
        ext = cmd.ext_fields
        access_key = ext.get(ACCESS_KEY)
        if access_key is None:
            return AclError("No accessKey is configured", _VALIDATE.format(664))
        account = state.accounts.get(access_key if type(access_key) is str else str(access_key))
        if account is None:
            return AclError(f"No acl config for {access_key}", _VALIDATE.format(668))
        if account.white(remote_host):
            return None
        expected = account.signer.sign(combine_request_content(ext), cmd.body)
        signature = ext.get(SIGNATURE)
        if type(signature) is not str or not signature.isascii() or not hmac.compare_digest(expected, signature):
            return AclError(f"Check signature failed for accessKey={access_key}", _VALIDATE.format(684))
        return account

    @property
    def state(self) -> _State:
        assert self._state is not None, "ACL not loaded"
        return self._state

    def config_version(self) -> str:
        """Java ``getAclConfigDataVersion``: the default file's DataVersion as JSON."""
        v = self.state.versions.get(self.default_file) or _DataVersion(0, 0)
        return json.dumps(v.to_json(), separators=(",", ":"))

    def all_config_versions(self) -> str:
        """Java ``getDataVersionMap`` as JSON: file → DataVersion."""
        return json.dumps({p: v.to_json() for p, v in self.state.versions.items()}, separators=(",", ":"))

    def all_config(self) -> dict[str, Any]:
        """Java ``getAllAclConfig`` (GET_BROKER_CLUSTER_ACL_CONFIG's body): every account as
        configured (secrets included: admin accounts only) and every global white address."""
        configs: list[dict[str, Any]] = []
        white: list[str] = []
        seen: set[str] = set()
        for path in self.state.files:
            try:
                data, _ = _read_yaml(path)
            except (OSError, AclConfigError):
                continue
            if not data:
                continue
            white += [str(a) for a in _as_list(data.get(_GLOBAL_WHITE), _GLOBAL_WHITE, path) if a is not None]
            for raw in _as_list(data.get(_ACCOUNTS), _ACCOUNTS, path):
                if not isinstance(raw, dict) or _str_or_none(raw.get("accessKey")) in seen:
                    continue
                seen.add(str(raw.get("accessKey")))
                configs.append(
                    {
                        "accessKey": _str_or_none(raw.get("accessKey")),
                        "secretKey": _str_or_none(raw.get("secretKey")),
                        "whiteRemoteAddress": _str_or_none(raw.get("whiteRemoteAddress")),
                        "admin": raw.get("admin") is True,
                        "defaultTopicPerm": _str_or_none(raw.get("defaultTopicPerm")),
                        "defaultGroupPerm": _str_or_none(raw.get("defaultGroupPerm")),
                        "topicPerms": [str(x) for x in raw.get("topicPerms") or []],
                        "groupPerms": [str(x) for x in raw.get("groupPerms") or []],
                    }
                )
        return {"globalWhiteAddrs": white, "plainAccessConfigs": configs}

    def _write(self, path: str, data: dict[str, Any]) -> None:
        """Bump ``dataVersion`` (Java ``updateAclConfigFileVersion``) and write the file whole
        (a temporary file renamed over it, so the watcher never reads half a file), then
        take the new configuration into force."""
        old = self.state.versions.get(path) or _DataVersion(0, 0)
        dv = data.get(_DATA_VERSION)
        counter = old.counter
        if isinstance(dv, list) and dv and isinstance(dv[0], dict):
            try:
                counter = int(dv[0].get("counter", counter))
            except (TypeError, ValueError):
                pass
        data[_DATA_VERSION] = [{"counter": counter + 1, "timestamp": int(time.time() * 1000)}]
        import yaml

        text = yaml.safe_dump(data, default_flow_style=False, sort_keys=False, allow_unicode=True)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self._install(self.read())

    def _load_map(self, path: str) -> dict[str, Any]:
        try:
            data, _ = _read_yaml(path)
        except FileNotFoundError:
            data = None
        return data if isinstance(data, dict) else {}

    def update_access_config(self, cfg: dict[str, Any]) -> bool:
        """Java ``updateAccessConfig`` (blocking). ``cfg`` has the yml's account keys;
        ``topicPerms`` / ``groupPerms`` are lists or None (unchanged).

        Raises:
            AclConfigError: keys too short, or a bad permission or address.
        """
        ak, sk = cfg.get("accessKey"), cfg.get("secretKey")
        check_keys(ak, sk)
        Permission.check_resource_perms(cfg.get("topicPerms"))
        Permission.check_resource_perms(cfg.get("groupPerms"))
        remote_address_strategy(cfg.get("whiteRemoteAddress"))
        path = self.state.key_file.get(str(ak), self.default_file)
        data = self._load_map(path)
        accounts = data.get(_ACCOUNTS)
        if not isinstance(accounts, list):
            accounts = []
        existing = next((a for a in accounts if isinstance(a, dict) and str(a.get("accessKey")) == ak), None)
        account = existing if existing is not None else {}
        if existing is not None:
            accounts.remove(existing)
        # Java createAclAccessConfigMap: given fields replace, absent ones stay.
        account["accessKey"] = ak
        account["secretKey"] = sk
        if cfg.get("whiteRemoteAddress") is not None:
            account["whiteRemoteAddress"] = cfg["whiteRemoteAddress"]
        account["admin"] = bool(cfg.get("admin"))
        for key in ("defaultTopicPerm", "defaultGroupPerm"):
            if cfg.get(key):
                account[key] = cfg[key]
        for key in ("topicPerms", "groupPerms"):
            if cfg.get(key) is not None:
                account[key] = list(cfg[key])
        _build_account(account, path)  # refuse what the next load would refuse
        accounts.append(account)
        data[_ACCOUNTS] = accounts
        self._write(path, data)
        return True

    def delete_access_config(self, access_key: str | None) -> bool:
        """Java ``deleteAccessConfig`` (blocking): False when the key is unknown."""
        if not access_key or access_key not in self.state.key_file:
            return False
        path = self.state.key_file[access_key]
        data = self._load_map(path)
        accounts = data.get(_ACCOUNTS)
        if not isinstance(accounts, list):
            return False
        kept = [a for a in accounts if not (isinstance(a, dict) and str(a.get("accessKey")) == access_key)]
        if len(kept) == len(accounts):
            return False
        data[_ACCOUNTS] = kept
        self._write(path, data)
        return True

    def update_global_white_addrs(self, addrs: list[str] | None, path: str | None = None) -> bool:
        """Java ``updateGlobalWhiteAddrsConfig`` (blocking): replace the list in ``path`` (the
        default file when empty), which must be an existing yml under the home directory.

        Raises:
            AclConfigError: an address is not one of the white-address forms.
        """
        if addrs is None:
            return False
        path = os.path.abspath(path) if path else self.default_file
        if not os.path.isfile(path) or not path.startswith(self.home + os.sep) or not path.endswith((".yml", ".yaml")):
            log.error("ACL: %s is not an ACL file under %s", clip(path), self.home)
            return False
        for a in addrs:
            remote_address_strategy(a)
        data = self._load_map(path)
        data[_GLOBAL_WHITE] = list(addrs)
        self._write(path, data)
        return True

    async def run_update(self, fn: Callable[..., bool], *args: Any) -> bool:
        """Run one admin update off the loop, one at a time (Java's ``synchronized``)."""
        async with self._update_lock:
            return await asyncio.to_thread(fn, *args)


def refuse_acl(conn: Any, cmd: RemotingCommand, refusal: AclError) -> None:
    """Answer a refused request as Java 4.9.8 does (``NettyRemotingAbstract`` catching the
    RPCHook's exception): SYSTEM_ERROR, the AclException's text as remark, no extFields, in JSON
    whatever the request's serialization (``createResponseCommand`` keeps the default). Oneway
    requests get no answer. One log line per peer and reason per 10 s, naming the accessKey only.
    """
    access_key = cmd.ext_fields.get(ACCESS_KEY)
    _rlog.warning(
        f"acl:{conn.remote_addr.rpartition(':')[0]}:{refusal.origin}",
        "ACL refused code %s from %s (accessKey %s): %s",
        cmd.code,
        conn.remote_addr,
        clip(access_key),
        clip(refusal.message),
    )
    if cmd.flag & FLAG_ONEWAY:
        return
    response = cmd.response(ResponseCode.SYSTEM_ERROR, refusal.remark)
    response.serialize_type = 0
    conn.send_response(response)


# Bodies above this are signed-checked in a worker thread (hashlib releases the GIL): a 4 MiB
# body costs milliseconds of HMAC, which must not stall the event loop.
OFF_LOOP_BODY_BYTES = 64 * 1024


class AclChecker(Protocol):
    """What :func:`acl_guard` needs: ``check(cmd, remote_host)`` → None (process it) or the
    refusal (blocking-safe: large bodies are checked in a worker thread)."""

    def check(self, cmd: RemotingCommand, remote_host: str) -> AclError | None: ...


def acl_guard(
    acl: AclChecker, process_request: Callable[[Any, RemotingCommand], Any]
) -> Callable[[Any, RemotingCommand], Any]:
    """``process_request`` behind the ACL check (Java registers the validator as the server's
    RPCHook ``doBeforeRequest``): a refused request is answered here and never dispatched."""

    def checked(conn: Any, cmd: RemotingCommand) -> Any:
        if cmd.body is not None and cmd.body_length() > OFF_LOOP_BODY_BYTES:
            return _checked_off_loop(conn, cmd)
        refusal = acl.check(cmd, conn.remote_addr.rpartition(":")[0])
        if refusal is None:
            return process_request(conn, cmd)
        refuse_acl(conn, cmd, refusal)
        return None

    async def _checked_off_loop(conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        refusal = await asyncio.to_thread(acl.check, cmd, conn.remote_addr.rpartition(":")[0])
        if refusal is not None:
            refuse_acl(conn, cmd, refusal)
            return None
        result = process_request(conn, cmd)
        if inspect.isawaitable(result):
            result = await result
        answer: RemotingCommand | None = result
        return answer

    return checked
