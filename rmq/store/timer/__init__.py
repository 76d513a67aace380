"""Timer messages in the store (Java 5 ``org.apache.rocketmq.store.timer``): a message with a
delivery time waits in ``rmq_sys_wheel_timer`` until the timer wheel puts it into its real
topic. See docs/design.md "Timer messages".

* :mod:`.files`: the timer log (append-only records), the timer wheel (one slot per tick of a
  ring) and the checkpoint (``timercheck``), Java ``TimerLog`` / ``TimerWheel`` /
  ``TimerCheckpoint``;
* :mod:`.service`: :class:`TimerMessageStore`, the enqueue and dequeue services and the flush
  of the files with the checkpoint (Java ``TimerMessageStore``).
"""

from rmq.store.timer.files import TimerCheckpoint, TimerLog, TimerWheel
from rmq.store.timer.service import TIMER_TOPIC, TimerMessageStore, timer_delete_key, timer_slot_time

__all__ = [
    "TIMER_TOPIC",
    "TimerCheckpoint",
    "TimerLog",
    "TimerMessageStore",
    "TimerWheel",
    "timer_delete_key",
    "timer_slot_time",
]
