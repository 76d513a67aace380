"""A package's public names loaded from their modules on first use (PEP 562).

``rmq``'s packages re-export classes from their submodules; importing them all at once made every
process pay for every client and consumer (docs/design.md "Start-up time"). A package lists where
each name lives and takes its module ``__getattr__`` and ``__dir__`` from :func:`lazy_exports`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, str], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the package named ``package``: a name of ``where`` is
    imported from ``package + "." + where[name]`` on first access and kept in the package's
    namespace (later lookups do not come here); any other name is an AttributeError.
    ``__dir__`` lists the namespace and ``public`` (the package's ``__all__``)."""
    names = tuple(public)

    def __getattr__(name: str) -> Any:
        sub = where.get(name)
        if sub is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # __import__, not importlib.import_module: `python -X importtime` reports only the former
        module = f"{package}.{sub}"
        __import__(module)
        value = getattr(sys.modules[module], name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
