"""Java ``.properties`` text (``java.util.Properties``, ``MixAll.string2Properties`` /
``properties2String``) and :class:`ConfigError`, the error of every bad configuration value.

Re-exported by :mod:`rmq.config`; kept here, apart from the config classes, so that what reads
a properties file without configuring a daemon (TLS settings, the CLI's options) imports
little (docs/design.md "Start-up time").
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ConfigError", "format_properties", "load_properties", "parse_properties", "property_text"]


class ConfigError(ValueError):
    """A configuration value that cannot be used (bad number, unknown choice, unreadable file).

    Not retriable: the daemon refuses to start and prints the message.
    """


def parse_properties(text: str | bytes | bytearray | memoryview) -> dict[str, str]:
    r"""Parse Java ``.properties`` text as ``java.util.Properties.load`` does (Java
    ``MixAll.string2Properties``; the one decoder of properties text, files and bodies alike):
    ``key=value``, ``key: value`` or ``key value`` lines, ``#``/``!`` comments, backslash
    continuations, and the escapes ``\:``, ``\=``, ``\ ``, ``\t``, ``\n``, ``\uXXXX``. Values keep
    Java's meaning except that trailing blanks are dropped (in a conf file they are a typo).
    A later duplicate key wins, as in Java. Bytes are read as UTF-8. :class:`ConfigError` on a
    malformed escape or bytes that are not UTF-8."""
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConfigError(f"bad properties text: not UTF-8 ({e})") from None
    import javaproperties  # 50 ms of xml/email/urllib imports: only when a file is read

    try:
        props = javaproperties.loads(text)
    except (ValueError, UnicodeError) as e:
        raise ConfigError(f"bad properties text: {e}") from None
    return {k: v.rstrip() for k, v in props.items()}


def format_properties(props: Mapping[str, object]) -> str:
    """Properties text as Java ``MixAll.properties2String`` writes it (the one encoder): a
    ``key=value`` line per property, in the mapping's order, no escaping; a ``None`` value is
    left out (Java skips null values) and booleans are Java's ``true``/``false``."""
    return "".join(f"{k}={property_text(v)}\n" for k, v in props.items() if v is not None)


def property_text(value: object) -> str:
    """One value as Java's ``toString`` writes it in properties text: ``true``/``false`` for
    booleans, ``""`` for ``None``, ``str`` otherwise."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def load_properties(path: str) -> dict[str, str]:
    """Read a properties file; :class:`ConfigError` when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file {path} is not UTF-8 text: {e}") from e
