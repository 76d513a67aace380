"""Timer messages on the SEND path (Java 5 ``HookUtils.handleScheduleMessage`` /
``checkIfTimerMessage`` / ``transformTimerMessage``).

A plain or committed message carrying ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``,
``TIMER_DELIVER_MS`` (read in that order, as Java) or ``__STARTDELIVERTIME`` (the deliver-at
epoch ms of 4.x commercial clients, Aliyun ONS; Java 5 only counts it as a delay message in
its metrics) is rewritten into ``rmq_sys_wheel_timer`` queue 0 with ``TIMER_OUT_MS`` (the
delivery time, epoch ms), ``REAL_TOPIC`` and ``REAL_QID``; the store's timer wheel
(``rmq.store.timer``) puts it into its topic at that time. As Java:

* a delay level (``DELAY`` > 0) wins: the timer properties are removed and the level applies;
* a message already in the timer topic or with ``TIMER_OUT_MS`` is left alone;
* a time that is not a number, or more than ``timerMaxDelaySec`` ahead → MESSAGE_ILLEGAL with
  Java's remark; ``timerWheelEnable=false`` → SYSTEM_ERROR; a slot past
  ``timerCongestNumEachSlot`` → SYSTEM_ERROR (flow control);
* a time not in the future is stored at once as an ordinary message (a ``TIMER_DEL_UNIQKEY``
  one is MESSAGE_ILLEGAL).

Unlike Java, ``TIMER_OUT_MS`` is the time asked for, not rounded down to the precision: the
wheel rounds up, so a timer is never delivered early.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rmq.common.message import MessageConst, MessageSysFlag, java_properties, properties_to_string
from rmq.protocol.codes import ResponseCode
from rmq.store import MessageInner
from rmq.store.timer import TIMER_TOPIC

if TYPE_CHECKING:
    from rmq.broker.context import TimerContext

__all__ = ["TIMER_MARKS", "rewrite_if_timer"]

_TIMER_KEYS = (
    MessageConst.TIMER_DELAY_SEC,
    MessageConst.TIMER_DELAY_MS,
    MessageConst.TIMER_DELIVER_MS,
    MessageConst.START_DELIVER_TIME,
)
#: Property markers that send a SEND to the Python path (rmq/broker/processors/send_back.py).
TIMER_MARKS = tuple(k + "\x01" for k in _TIMER_KEYS)


def rewrite_if_timer(controller: TimerContext, msg: MessageInner) -> tuple[int, str] | None:
    """Apply the timer semantics to ``msg`` in place; ``(response code, remark)`` to refuse it."""
    tran = MessageSysFlag.get_transaction_value(msg.sys_flag)
    if tran not in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE):
        return None
    if msg.topic == TIMER_TOPIC:
        return None  # a rolled timer message (Java isRolledTimerMessage)
    props_str = msg.properties_str
    if props_str is not None:
        if not any(m in props_str for m in TIMER_MARKS):
            return None
        props = java_properties(props_str)
    else:
        props = dict(msg.properties)
    # A pair with an empty value is absent, as Java 5's string2messageProperties reads the text
    # (and as rmq.common.topic_attributes types the message): no timer, no refusal.
    present = [k for k in _TIMER_KEYS if props.get(k)]
    if not present:
        return None
    if _int(props.get(MessageConst.DELAY_TIME_LEVEL)) > 0:
        # Java checkIfTimerMessage: the delay level wins; the timer properties go
        for k in present:
            del props[k]
        _set_props(msg, props)
        return None
    if MessageConst.TIMER_OUT_MS in props:
        return None
    scfg = controller.store_config
    if not scfg.timer_wheel_enable:
        return ResponseCode.SYSTEM_ERROR, "accurate timer message is not enabled, timerWheelEnable is false"
    now = time.time_ns() // 1_000_000
    try:
        if MessageConst.TIMER_DELAY_SEC in present:
            deliver = now + int(props[MessageConst.TIMER_DELAY_SEC]) * 1000
        elif MessageConst.TIMER_DELAY_MS in present:
            deliver = now + int(props[MessageConst.TIMER_DELAY_MS])
        elif MessageConst.TIMER_DELIVER_MS in present:
            deliver = int(props[MessageConst.TIMER_DELIVER_MS])
        else:
            deliver = int(props[MessageConst.START_DELIVER_TIME])
    except ValueError:
        return ResponseCode.MESSAGE_ILLEGAL, _illegal(scfg.timer_max_delay_sec)
    if deliver <= now:
        if MessageConst.TIMER_DEL_UNIQKEY in props:
            return ResponseCode.MESSAGE_ILLEGAL, _illegal(scfg.timer_max_delay_sec)
        return None  # due already: stored as an ordinary message
    if deliver - now > scfg.timer_max_delay_sec * 1000:
        return ResponseCode.MESSAGE_ILLEGAL, _illegal(scfg.timer_max_delay_sec)
    timer = controller.timer_message_store
    if timer is not None and timer.is_reject(deliver):
        congest = scfg.timer_congest_num_each_slot
        return (
            ResponseCode.SYSTEM_ERROR,
            f"timer message is under flow control, max num limit is {congest * 2} or the current value is greater "
            f"than {congest} and less than {congest * 2}, trigger random flow control",
        )
    props[MessageConst.TIMER_OUT_MS] = str(deliver)
    props[MessageConst.REAL_TOPIC] = msg.topic
    props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
    _set_props(msg, props)
    msg.topic = TIMER_TOPIC
    msg.queue_id = 0
    msg.tags_code = None
    return None


def has_timer_properties(props_str: str | None) -> bool:
    """Whether a properties string names a timer property (a batch's are refused)."""
    return props_str is not None and any(m in props_str for m in TIMER_MARKS)


def _illegal(max_delay_sec: int) -> str:
    return (
        f"timer message illegal, the delay time should not be bigger than the max delay {max_delay_sec * 1000}ms; "
        "or if set del msg, the delay time should be bigger than the current time"
    )


def _set_props(msg: MessageInner, props: dict[str, str]) -> None:
    msg.properties = props
    msg.properties_str = properties_to_string(props, trailing_separator=False)


def _int(value: str | None) -> int:
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0
