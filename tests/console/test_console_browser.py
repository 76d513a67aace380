"""The web console end to end: headless Chromium drives a real ``rmq console`` against a real
broker. Every wait is for a state on the page (Playwright's ``expect`` retries until it holds
or its timeout passes), never a sleep. Screenshots of the main pages go to a tmp dir and
``build/screenshots/``."""

from __future__ import annotations

import re
from typing import Any

import pytest

import rmq
import rmq.errors
from rmq.client.admin import Admin
from rmq.types import ConsumeFromWhere, ConsumeResult, MessageExt
from tests.console.console_support import PASSWORD, USER, get_json, log_in, login_sync

pytestmark = [pytest.mark.slow, pytest.mark.heavy(55)]

WAIT = 60_000  # ms: generous, the machine is shared


def expect() -> Any:
    """Playwright's ``expect`` with WAIT as the default timeout of every assertion (its own
    default, 5 s, is too short on the shared machine)."""
    from playwright.sync_api import expect as _expect

    _expect.set_options(timeout=WAIT)
    return _expect


def open_page(pg: Any, hash_path: str, page: str) -> None:
    pg.goto(f"/#/{hash_path}")
    expect()(pg.locator(f"main[data-page='{page}']")).to_be_visible()


def no_errors(pg: Any) -> None:
    expect()(pg.locator(".error")).to_have_count(0)


async def _create_topic(ns: str, topic: str, queues: int) -> None:
    async with Admin(ns) as admin:
        for addr in await admin.master_addrs():
            await admin.create_and_update_topic_config(addr, topic, read_queue_nums=queues, write_queue_nums=queues)


async def _produce(ns: str, topic: str, n: int, body: bytes = b"m", keys: tuple[str, ...] = ()) -> list[str]:
    async with rmq.Producer(ns, f"PG_{topic}") as p:
        return [(await p.send(rmq.Message(topic, body + str(i).encode(), keys=keys))).msg_id for i in range(n)]


class Consumer:
    """A push consumer in the loop thread that counts what it handled."""

    def __init__(self, lt: Any, ns: str, group: str, topic: str, **kw: Any) -> None:
        self.lt = lt
        self.seen: list[MessageExt] = []
        self.fail_first = kw.pop("fail_first", None)
        self._failed: set[bytes] = set()
        self.pc = rmq.PushConsumer(
            ns, group, handler=self.handle, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **kw
        )
        self.pc.subscribe(topic, "*")

    async def handle(self, msg: MessageExt) -> ConsumeResult:
        self.seen.append(msg)
        if self.fail_first is not None and msg.body == self.fail_first and msg.body not in self._failed:
            self._failed.add(msg.body)
            return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.SUCCESS

    def start(self) -> Consumer:
        self.lt.run(self.pc.start())
        return self

    def stop(self) -> None:
        self.lt.run(self.pc.close())


def wait_for(pred: Any, timeout: float = 60.0, what: str = "") -> None:
    from rmq._testing import wait_until_sync

    wait_until_sync(pred, timeout=timeout, what=what)


# ---------------------------------------------------------------------------------------------


PAGES = [
    ("", "home", "#brokers"),
    ("cluster", "cluster", "#brokers"),
    ("topics", "topics", "#topic-list"),
    ("groups", "groups", "#group-list"),
    ("producers", "producers", "form"),
    ("messages", "messages", "#by-time"),
    ("dlq", "dlq", "#dlq-form"),
    ("dashboard", "dashboard", "#broker-chart"),
]


@pytest.mark.parametrize(("path", "name", "marker"), PAGES, ids=[p[1] for p in PAGES])
def test_each_page_opens(page: Any, cluster: Any, shots: Any, path: str, name: str, marker: str) -> None:
    open_page(page, path, name)
    expect()(page.locator(marker).first).to_be_visible()
    no_errors(page)
    if name in ("home", "cluster"):
        expect()(page.locator("#brokers")).to_contain_text(cluster.broker_addr)
        expect()(page.locator("#brokers")).to_contain_text("V4_9_8")
    if name == "topics":
        # the filters: system topics hidden, then shown
        expect()(page.locator("#topic-list")).not_to_contain_text("SCHEDULE_TOPIC_XXXX")
        page.locator("#topic-filters input[name=system]").check()
        expect()(page.locator("#topic-list")).to_contain_text("SCHEDULE_TOPIC_XXXX")
    if name == "cluster":
        page.locator("button[data-action=status]").first.click()
        expect()(page.locator("#broker-runtime")).to_contain_text("putTps")
        page.locator("button[data-action=config]").first.click()
        expect()(page.locator("#broker-config")).to_contain_text("brokerClusterName")
    shots(page, f"console-{name}")


def test_topic_create_send_and_find(page: Any, shots: Any) -> None:
    topic = "ConsoleTopicA"
    open_page(page, "topics", "topics")
    form = page.locator("#topic-form")
    form.locator("input[name=topic]").fill(topic)
    form.locator("input[name=readQueueNums]").fill("4")
    form.locator("input[name=writeQueueNums]").fill("4")
    form.locator("button[type=submit]").click()
    expect()(page.locator(".notice")).to_contain_text(f"Topic {topic} written", timeout=WAIT)
    page.locator("#topic-list").get_by_role("link", name=topic, exact=True).click()
    expect()(page.locator("main[data-page=topic]")).to_be_visible()
    expect()(page.locator("#topic-status tbody tr")).to_have_count(4, timeout=WAIT)
    expect()(page.locator("#topic-route")).to_contain_text("broker-a")

    # a test message whose key and body are markup: shown as text, never run
    body = '<b id="bold">hello console</b><img src=x onerror="window.__xss=1">'
    send = page.locator("#send-form")
    send.locator("input[name=keys]").fill("order-42 <img src=x onerror=window.__xss=2>")
    send.locator("input[name=tags]").fill("TagC")
    send.locator("textarea[name=body]").fill(body)
    send.locator("button[type=submit]").click()
    expect()(page.locator("#send-result .notice")).to_contain_text("SEND_OK", timeout=WAIT)
    ids = page.locator("#send-ids td.mono")
    msg_id, offset_msg_id = ids.nth(0).inner_text().strip(), ids.nth(1).inner_text().strip()
    assert re.fullmatch(r"[0-9A-F]{32}", offset_msg_id), offset_msg_id
    shots(page, "console-topic")

    # by key
    open_page(page, "messages", "messages")
    page.locator("button[data-tab=key]").click()
    page.locator("#by-key input[name=topic]").fill(topic)
    page.locator("#by-key input[name=key]").fill("order-42")
    page.locator("#by-key button[type=submit]").click()
    expect()(page.locator("#message-list")).to_contain_text(msg_id, timeout=WAIT)
    assert page.locator("#message-list img").count() == 0
    # by topic and time range
    page.locator("button[data-tab=time]").click()
    page.locator("#by-time input[name=topic]").fill(topic)
    page.locator("#by-time button[type=submit]").click()
    expect()(page.locator("#message-list")).to_contain_text(msg_id, timeout=WAIT)
    expect()(page.locator("#message-list")).to_contain_text("<b id=")
    shots(page, "console-messages")
    # by id (the offset message id) → the detail
    page.locator("button[data-tab=id]").click()
    page.locator("#by-id input[name=msgId]").fill(offset_msg_id)
    page.locator("#by-id button[type=submit]").click()
    expect()(page.locator("main[data-page=message]")).to_be_visible()
    expect()(page.locator("#message-body")).to_have_text(body, timeout=WAIT)
    expect()(page.locator("#message-properties")).to_contain_text("UNIQ_KEY")
    expect()(page.locator("#message-info")).to_contain_text("TagC")
    assert page.locator("#bold").count() == 0 and page.locator("main img").count() == 0
    assert page.evaluate("window.__xss") is None
    no_errors(page)
    shots(page, "console-message")
    # and by the client message id within the topic
    page.goto(f"/#/message?id={msg_id}&topic={topic}")
    expect()(page.locator("#message-info")).to_contain_text(offset_msg_id, timeout=WAIT)


def test_typed_topic_shows_its_message_type_and_takes_message_groups(page: Any, cluster: Any, loop_thread: Any) -> None:
    """A FIFO topic made with the topic form (Java 5's message.type attribute): the topic page
    shows its type, a test message with a message group is stored, one without is refused with
    the broker's reason."""
    topic = "ConsoleFifoTopic"
    open_page(page, "topics", "topics")
    form = page.locator("#topic-form")
    form.locator("input[name=topic]").fill(topic)
    form.locator("input[name=readQueueNums]").fill("2")
    form.locator("input[name=writeQueueNums]").fill("2")
    form.locator("select[name=messageType]").select_option("FIFO")
    form.locator("button[type=submit]").click()
    expect()(page.locator(".notice")).to_contain_text(f"Topic {topic} written", timeout=WAIT)
    page.locator("#topic-list").get_by_role("link", name=topic, exact=True).click()
    expect()(page.locator("main[data-page=topic]")).to_be_visible()
    expect()(page.locator("#topic-type")).to_contain_text("Message type: FIFO")
    send = page.locator("#send-form")
    send.locator("textarea[name=body]").fill("no group")
    send.locator("button[type=submit]").click()
    expect()(page.locator("#send-result")).to_contain_text("expected type is FIFO, but actual type is NORMAL")
    send.locator("input[name=messageGroup]").fill("order-1")
    send.locator("button[type=submit]").click()
    expect()(page.locator("#send-result .notice")).to_contain_text("SEND_OK", timeout=WAIT)
    # an untyped topic says so
    loop_thread.run(_create_topic(cluster.namesrv_addr, "ConsolePlainTopic", 1))
    open_page(page, "topic?name=ConsolePlainTopic", "topic")
    expect()(page.locator("#topic-type")).to_contain_text("untyped")


def test_group_lag_falls_reset_and_skip(page: Any, cluster: Any, loop_thread: Any, shots: Any) -> None:
    ns, topic, group = cluster.namesrv_addr, "ConsoleLagTopic", "ConsoleLagGroup"
    loop_thread.run(_create_topic(ns, topic, 2))
    ids = loop_thread.run(_produce(ns, topic, 30))
    c = Consumer(loop_thread, ns, group, topic).start()
    wait_for(lambda: len({m.msg_id for m in c.seen}) >= 30, what="the consumer to take all 30 messages")
    c.stop()

    open_page(page, f"group?name={group}", "group")
    lag = page.locator("#group-lag")
    expect()(lag).to_have_text("0", timeout=WAIT)
    # the topic's two queues and the group's retry queue
    expect()(page.locator("#group-queues tbody tr")).to_have_count(3)
    expect()(page.locator("#group-queues .badge.retry")).to_have_count(1)

    # reset to an hour ago with nobody online: the admin sets the offsets itself
    expect()(page.locator("#reset-topic")).to_have_value(topic)
    page.locator("#reset-button").click()
    expect()(page.locator("#reset-result")).to_contain_text("2 queue offsets set", timeout=WAIT)
    expect()(page.locator("#reset-result")).to_contain_text("admin")
    expect()(lag).to_have_text("30", timeout=WAIT)
    shots(page, "console-group")

    # the consumer runs again: the lag falls to 0 without a reload
    c2 = Consumer(loop_thread, ns, group, topic).start()
    try:
        expect()(lag).to_have_text("0", timeout=WAIT)
        expect()(page.locator("#group-online")).to_have_text("1", timeout=WAIT)
        page.locator("button[data-action=running]").first.click()
        expect()(page.locator("#running-info")).to_contain_text(topic, timeout=WAIT)
        # a reset while a member is online goes through the broker, which tells the member
        seen_before = len(c2.seen)
        page.locator("#reset-button").click()
        expect()(page.locator("#reset-result")).to_contain_text("broker", timeout=WAIT)
        wait_for(lambda: len(c2.seen) >= seen_before + 30, what="the member to consume the 30 messages again")
        open_page(page, f"group?name={group}", "group")  # fresh figures: the lag is 0 once it commits
        expect()(lag).to_have_text("0", timeout=WAIT)

        # a message's detail: consumed by the group; resent to its online member
        tracks = page.locator("#message-tracks")

        def consumed() -> bool:
            # the detail is read once per visit, and the member commits its offsets every few
            # seconds (the group's lag may read 0 from the console's 2 s cache a moment before):
            # visit again until the broker's committed offset says so
            page.goto("/#/")
            page.goto(f"/#/message?id={ids[0]}&topic={topic}")
            expect()(tracks).to_contain_text(group, timeout=WAIT)
            return "NOT_CONSUME_YET" not in tracks.inner_text() and "CONSUMED" in tracks.inner_text()

        wait_for(consumed, what="the message's detail to say CONSUMED")
        seen_before = sum(m.msg_id == ids[0] for m in c2.seen)
        tracks.locator(f"button[data-group='{group}']").click()
        expect()(page.locator("#resend-result")).to_contain_text("CR_SUCCESS", timeout=WAIT)
        wait_for(lambda: sum(m.msg_id == ids[0] for m in c2.seen) > seen_before, what="the resent message")
        shots(page, "console-message-consumed")
    finally:
        c2.stop()
    open_page(page, f"group?name={group}", "group")
    expect()(lag).to_have_text("0", timeout=WAIT)

    # skip accumulated: 10 new messages nobody consumes, then skipped
    loop_thread.run(_produce(ns, topic, 10))
    expect()(lag).to_have_text("10", timeout=WAIT)
    page.locator("#skip-button").click()
    expect()(page.locator("#reset-result")).to_contain_text("queue offsets set", timeout=WAIT)
    expect()(lag).to_have_text("0", timeout=WAIT)

    # the group list sorts by lag and shows the group
    open_page(page, "groups", "groups")
    expect()(page.locator("#group-list")).to_contain_text(group, timeout=WAIT)
    page.locator("#group-list th[data-key=diffTotal]").click()
    no_errors(page)
    shots(page, "console-groups")


def test_dlq_browse_and_resend(page: Any, cluster: Any, loop_thread: Any, shots: Any) -> None:
    ns, topic, group = cluster.namesrv_addr, "ConsoleDlqTopic", "ConsoleDlqGroup"
    loop_thread.run(_create_topic(ns, topic, 1))
    c = Consumer(loop_thread, ns, group, topic, fail_first=b"poison0", max_reconsume_times=0).start()
    try:
        loop_thread.run(_produce(ns, topic, 1, body=b"poison"))
        wait_for(lambda: any(m.body == b"poison0" for m in c.seen), what="the poison message's first delivery")

        async def dead_letters() -> int:
            async with Admin(ns) as admin:
                try:
                    stats = await admin.examine_topic_stats(f"%DLQ%{group}")
                except rmq.errors.RMQError:
                    return 0
                return sum(o.max_offset for o in stats.offset_table.values())

        wait_for(lambda: loop_thread.run(dead_letters()) >= 1, what="the poison message in the DLQ")
        open_page(page, f"dlq?group={group}", "dlq")
        rows = page.locator("#dlq-list tbody tr")
        page.locator("#dlq-form button[type=submit]").click()
        expect()(page.locator("#dlq-list")).to_contain_text("poison0", timeout=WAIT)
        expect()(rows).to_have_count(1)
        rows.first.locator("input.pick").check()
        page.locator("#dlq-resend").click()
        expect()(page.locator("#dlq-resend-table")).to_contain_text("CR_SUCCESS", timeout=WAIT)
        shots(page, "console-dlq")
        wait_for(lambda: sum(m.body == b"poison0" for m in c.seen) >= 2, what="the resent dead letter's delivery")
    finally:
        c.stop()


def test_group_and_topic_create_and_delete_in_the_page(page: Any) -> None:
    open_page(page, "groups", "groups")
    form = page.locator("#group-form")
    form.locator("input[name=group]").fill("ConsolePageGroup")
    form.locator("input[name=retryMaxTimes]").fill("5")
    form.locator("button[type=submit]").click()
    expect()(page.locator(".notice")).to_contain_text("Group ConsolePageGroup written", timeout=WAIT)
    expect()(page.locator("#group-list")).to_contain_text("ConsolePageGroup", timeout=WAIT)
    page.locator("#group-list").get_by_role("link", name="ConsolePageGroup", exact=True).click()
    expect()(page.locator("#group-form input[name=retryMaxTimes]")).to_have_value("5", timeout=WAIT)
    page.locator("#delete-group").click()
    expect()(page.locator(".notice")).to_contain_text("Group ConsolePageGroup deleted", timeout=WAIT)

    open_page(page, "topics", "topics")
    page.locator("#topic-form input[name=topic]").fill("ConsolePageTopic")
    page.locator("#topic-form button[type=submit]").click()
    expect()(page.locator(".notice")).to_contain_text("written", timeout=WAIT)
    page.goto("/#/topic?name=ConsolePageTopic")
    expect()(page.locator("#topic-status tbody tr")).to_have_count(8, timeout=WAIT)
    page.locator("#delete-topic").click()
    expect()(page.locator(".notice")).to_contain_text("Topic ConsolePageTopic deleted", timeout=WAIT)
    open_page(page, "topics", "topics")
    expect()(page.locator("#topic-list")).to_be_visible(timeout=WAIT)
    expect()(page.locator("#topic-list")).not_to_contain_text("ConsolePageTopic")
    no_errors(page)


def test_dashboard_draws_topic_tps(page: Any, cluster: Any, console: Any, loop_thread: Any, shots: Any) -> None:
    ns, topic = cluster.namesrv_addr, "ConsoleTpsTopic"
    loop_thread.run(_create_topic(ns, topic, 2))
    open_page(page, "dashboard", "dashboard")
    expect()(page.locator("#broker-chart path").first).to_be_attached(timeout=WAIT)

    auth = login_sync(console.url)

    def rounds() -> int:
        return int(get_json(console.url, "/api/dashboard", auth)["rounds"])

    # two bursts with a sampling round after each: the topic's offsets grow between rounds
    for _ in range(2):
        seen = rounds()
        loop_thread.run(_produce(ns, topic, 20, b"t"))
        wait_for(lambda seen=seen: rounds() > seen, what="a sampling round after the sends")
    expect()(page.locator("#topic-chart .legend")).to_contain_text(topic, timeout=WAIT)
    no_errors(page)
    shots(page, "console-dashboard")


def test_log_in_see_the_cluster_log_out(anonymous_page: Any, cluster: Any, shots: Any) -> None:
    """The login form: a wrong password is an error on the form, the right one opens the
    console (the cluster page shows the broker), Log out brings the form back and the API
    refuses the old cookie."""
    pg = anonymous_page
    pg.goto("/#/cluster")
    expect()(pg.locator("main[data-page='login'] #login-form")).to_be_visible()
    expect()(pg.locator("#nav")).to_be_hidden()
    log_in(pg, USER, "not-" + PASSWORD)
    expect()(pg.locator("#login-problem .error")).to_contain_text("wrong user name or password")
    expect()(pg.locator("#login-password")).to_have_value("")
    shots(pg, "console-login-refused")
    log_in(pg)
    expect()(pg.locator("main[data-page='cluster']")).to_be_visible()
    expect()(pg.locator("main")).to_contain_text(cluster.broker_addr)
    expect()(pg.locator("#user")).to_have_text(USER)
    pg.click("#logout")
    expect()(pg.locator("main[data-page='login'] #login-form")).to_be_visible()
    status = pg.evaluate("fetch('/api/topics').then(r => r.status)")
    assert status == 401
    pg.reload()
    expect()(pg.locator("main[data-page='login'] #login-form")).to_be_visible()
