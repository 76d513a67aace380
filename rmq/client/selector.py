"""``MessageSelector``: how a consumer chooses messages of a topic (Java ``MessageSelector``).

``MessageSelector.tag("TagA || TagB")`` filters by tag (the broker matches tag hash codes, the
client the tags themselves); ``MessageSelector.sql("a > 5 AND b = 'x'")`` by a SQL92 expression
over message properties, evaluated by the broker (which needs ``enablePropertyFilter=true``).
Both go to ``subscribe(topic, selector)`` of push and pull consumers, where a plain string is
a tag expression as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmq.common.constants import ExpressionType
from rmq.errors import ConfigError

__all__ = ["MessageSelector"]


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """An expression and its type (``"TAG"`` or ``"SQL92"``).

    Build it with :meth:`sql` or :meth:`tag` (Java ``MessageSelector.bySql`` /
    ``MessageSelector.byTag``). A SQL92 expression is checked by the broker when the consumer
    starts (CHECK_CLIENT_CONFIG): a bad one, or a broker with ``enablePropertyFilter=false``,
    makes ``start()`` raise.
    """

    expression_type: str
    expression: str

    @classmethod
    def sql(cls, expression: str) -> MessageSelector:
        """A SQL92 selector over message properties (``"a > 5 AND b IN ('x', 'y')"``);
        :class:`rmq.errors.ConfigError` (a ``ValueError``) when empty."""
        if not isinstance(expression, str) or not expression.strip():
            raise ConfigError(
                "expression",
                f"a SQL92 selector needs an expression, got {str(expression)[:40]!r}",
                "a non-empty SQL92 expression",
            )
        return cls(ExpressionType.SQL92, expression)

    @classmethod
    def tag(cls, expression: str | None = "*") -> MessageSelector:
        """A tag selector (``"*"`` (default), ``"TagA"``, ``"TagA || TagB"``)."""
        expr = (expression or "").strip()
        return cls(ExpressionType.TAG, expr or "*")

    by_sql = sql
    by_tag = tag
