"""The console's newer pages end to end, clicked through in headless Chromium as a user would:
message trace (the timeline picture and its table), OPS (switch the name server, VIP/TLS),
RocketMQ 5 views, ACL (an admin account manages accounts and the white list; a read-only
account does not see the page; a broker with ACL off is said so), dead letters (select all,
CSV/JSON export, DEAD_LETTER status), the topic lists, the Messages page without an empty
card, the broadcast box, and the nav bar on a 390 px wide screen. Every wait is for a state on
the page (Playwright's ``expect``), never a sleep."""

from __future__ import annotations

import csv
import io
import json
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

import rmq
import rmq.errors
from rmq._testing import StandaloneProcess
from rmq.client.admin import Admin
from rmq.console.auth import hash_password
from rmq.types import ConsumeFromWhere, ConsumeResult, MessageExt
from tests.console.conftest import ConsoleProcess
from tests.console.console_support import PASSWORD, USER, log_in
from tests.console.test_console_browser import Consumer, _create_topic, expect, no_errors, open_page, wait_for

pytestmark = pytest.mark.slow

READER = "reader"
ACL_ADMIN, ACL_SECRET = "consoleAdmin", "console-secret-1"
PLAIN_ACL = textwrap.dedent(f"""
    globalWhiteRemoteAddresses:
      - 10.10.103.*
    accounts:
      - accessKey: plainUser
        secretKey: plain-secret-1
        admin: false
        defaultTopicPerm: SUB
      - accessKey: {ACL_ADMIN}
        secretKey: {ACL_SECRET}
        admin: true
    """)


def test_trace_page_draws_the_timeline(page: Any, cluster: Any, loop_thread: Any, shots: Any) -> None:
    ns, topic, group = cluster.namesrv_addr, "ConsoleTraceTopic", "ConsoleTraceGroup"
    loop_thread.run(_create_topic(ns, topic, 1))

    async def send() -> str:
        async with rmq.Producer(ns, "ConsoleTracePG", trace=True) as p:
            return (await p.send(rmq.Message(topic, b"traced", keys=("trace-key-1",)))).msg_id

    msg_id = loop_thread.run(send())
    c = Consumer(loop_thread, ns, group, topic, trace=True).start()
    try:
        wait_for(lambda: any(m.msg_id == msg_id for m in c.seen), what="the traced message consumed")
    finally:
        c.stop()

    open_page(page, "trace", "trace")
    page.locator("#trace-by-id input[name=msgId]").fill(msg_id)

    def traced() -> bool:
        # the trace messages are written asynchronously and indexed: ask again until both hops show
        page.locator("#trace-by-id button[type=submit]").click()
        # (the click replaced the results with "Searching…" at once: wait for the answer)
        expect()(page.locator("#trace-none, #trace-timeline-0, #trace-results .error").first).to_be_visible()
        return page.locator("#trace-timeline-0 rect[data-type=Sub].success").count() == 1

    wait_for(traced, what="the Pub and Sub hops on the timeline")
    timeline = page.locator("#trace-timeline-0")
    expect()(timeline.locator("rect[data-type=Pub]")).to_have_count(1)
    expect()(timeline).to_contain_text("Pub · ConsoleTracePG")
    expect()(timeline).to_contain_text(f"Sub · {group}")
    expect()(timeline).to_contain_text("ms · success")
    expect()(page.locator("#trace-results table")).to_contain_text(group)
    no_errors(page)
    shots(page, "console-trace")
    # by key, within the topic
    page.locator("#trace-by-key input[name=topic]").fill(topic)
    page.locator("#trace-by-key input[name=key]").fill("trace-key-1")
    page.locator("#trace-by-key button[type=submit]").click()
    expect()(page.locator("#trace-results h2")).to_contain_text(msg_id)
    # a trace topic nobody wrote: the reason, on the page
    page.locator("input[name=traceTopic]").fill("NoSuchTraceTopic")
    page.locator("#trace-by-id button[type=submit]").click()
    expect()(page.locator("#trace-results .error")).to_contain_text("traceTopicEnable=true")


def test_ops_page_switches_the_name_server(page: Any, cluster: Any, shots: Any) -> None:
    ns = cluster.namesrv_addr
    other = "localhost:" + ns.rsplit(":", 1)[1]
    open_page(page, "ops", "ops")
    expect()(page.locator("#ops-current")).to_contain_text(ns)
    page.locator("#ops-namesrv").fill("not an address")
    page.locator("#ops-namesrv-form button[type=submit]").click()
    expect()(page.locator("#ops-result .error")).to_contain_text("bad name server address")
    page.locator("#ops-namesrv").fill(other)
    page.locator("#ops-namesrv-form button[type=submit]").click()
    expect()(page.locator("#ops-result .notice")).to_contain_text(f"Now using {other}")
    expect()(page.locator("#ops-current")).to_contain_text(other)
    expect()(page.locator("#namesrv")).to_contain_text(other)
    # the VIP channel: the broker (on a free port) has none, so nothing changes
    page.locator("#ops-vip").check()
    page.locator("#ops-apply").click()
    expect()(page.locator("#ops-result .error")).to_contain_text("not switched")
    expect()(page.locator("#ops-vip")).not_to_be_checked()
    shots(page, "console-ops")
    # back to the first one, from the known list
    page.locator("#ops-known button[data-action=use]").click()
    expect()(page.locator("#ops-result .notice")).to_contain_text(f"Now using {ns}")
    open_page(page, "cluster", "cluster")
    expect()(page.locator("#brokers")).to_contain_text(cluster.broker_addr)


def test_v5_page_types_pop_mode_and_timers(page: Any, cluster: Any, shots: Any) -> None:
    ns = cluster.namesrv_addr
    open_page(page, "topics", "topics")
    form = page.locator("#topic-form")
    form.locator("input[name=topic]").fill("ConsoleV5Fifo")
    form.locator("select[name=messageType]").select_option("FIFO")
    form.locator("button[type=submit]").click()
    expect()(page.locator(".notice")).to_contain_text("Topic ConsoleV5Fifo written")

    open_page(page, "v5", "v5")
    expect()(page.locator("#v5-types")).to_contain_text("ConsoleV5Fifo")
    expect()(page.locator("#v5-types tr", has_text="ConsoleV5Fifo")).to_contain_text("FIFO")
    f = page.locator("#v5-mode-form")
    f.locator("input[name=topic]").fill("ConsoleV5Fifo")
    f.locator("input[name=group]").fill("ConsoleV5Group")
    f.locator("select[name=mode]").select_option("POP")
    f.locator("button[type=submit]").click()
    expect()(page.locator("#v5-mode-result .notice")).to_contain_text("POP set on")
    expect()(page.locator("#v5-modes")).to_contain_text("POP")
    expect()(page.locator("#v5-timer-brokers")).to_contain_text("broker-a")
    no_errors(page)
    shots(page, "console-v5")
    assert ns


def test_dlq_select_all_export_and_dead_letter_status(page: Any, cluster: Any, loop_thread: Any, shots: Any) -> None:
    ns, topic, group = cluster.namesrv_addr, "ConsoleDlqAllTopic", "ConsoleDlqAllGroup"
    loop_thread.run(_create_topic(ns, topic, 1))
    handled: list[MessageExt] = []

    async def always_fail(msg: MessageExt) -> ConsumeResult:
        handled.append(msg)
        return ConsumeResult.RECONSUME_LATER

    pc = rmq.PushConsumer(
        ns, group, handler=always_fail, max_reconsume_times=0,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )  # fmt: skip
    pc.subscribe(topic, "*")
    loop_thread.run(pc.start())
    try:

        async def send() -> list[str]:
            async with rmq.Producer(ns, "ConsoleDlqAllPG") as p:
                return [(await p.send(rmq.Message(topic, b"dead%d" % i))).msg_id for i in range(3)]

        loop_thread.run(send())

        async def dead_letters() -> int:
            async with Admin(ns) as admin:
                try:
                    stats = await admin.examine_topic_stats(f"%DLQ%{group}")
                except rmq.errors.RMQError:
                    return 0
                return sum(o.max_offset for o in stats.offset_table.values())

        wait_for(lambda: loop_thread.run(dead_letters()) >= 3, what="three dead letters")
    finally:
        loop_thread.run(pc.close())

    open_page(page, f"dlq?group={group}", "dlq")
    page.locator("#dlq-form button[type=submit]").click()
    expect()(page.locator("#dlq-list tbody tr")).to_have_count(3)
    page.locator("#dlq-select-all").check()
    expect()(page.locator("#dlq-list input.pick:checked")).to_have_count(3)
    page.locator("#dlq-select-all").uncheck()
    expect()(page.locator("#dlq-list input.pick:checked")).to_have_count(0)
    page.locator("#dlq-select-all").check()
    shots(page, "console-dlq-export")
    # the exports: the same three rows
    csv_text = page.evaluate("fetch(document.getElementById('dlq-export-csv').href).then(r => r.text())")
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert sorted(r["preview"] for r in rows) == ["dead0", "dead1", "dead2"], csv_text
    json_text = page.evaluate("fetch(document.getElementById('dlq-export-json').href).then(r => r.text())")
    assert sorted(r["preview"] for r in json.loads(json_text)) == ["dead0", "dead1", "dead2"]
    # a dead letter's detail: not CONSUMED for the group whose handler always failed
    page.locator("#dlq-list a").first.click()
    expect()(page.locator("main[data-page=message]")).to_be_visible()
    track = page.locator("#message-tracks tr", has_text=group)
    expect()(track.locator("[data-status]")).to_have_text("DEAD_LETTER")
    expect()(track).to_contain_text("not consumed")
    assert "CONSUMED" not in page.locator("#message-tracks").inner_text().replace("not consumed", "")

    # the group's broadcast box is the consumeBroadcastEnable right, labelled so, beside its model
    open_page(page, f"group?name={group}", "group")
    label = page.locator("#group-form label[title^=consumeBroadcastEnable]")
    expect()(label).to_have_text("allow broadcast consumers")
    expect()(label.locator("input[name=consumeBroadcastEnable]")).to_be_checked()  # Java's default: allowed
    no_errors(page)


def test_messages_form_topic_lists_and_no_empty_card(page: Any, cluster: Any, loop_thread: Any) -> None:
    loop_thread.run(_create_topic(cluster.namesrv_addr, "ConsoleListedTopic", 1))
    open_page(page, "messages", "messages")
    expect()(page.locator("main .card")).to_have_count(1)
    topic = page.locator("#by-time input[name=topic]")
    assert topic.get_attribute("list") == "topic-names"

    def listed() -> bool:
        # the lists are read at login and on each load of the page; the name server learns a
        # new topic at the broker's next registration
        page.reload()
        expect()(page.locator("main[data-page=messages]")).to_be_visible()
        return page.locator("#topic-names option[value=ConsoleListedTopic]").count() == 1

    wait_for(listed, what="the new topic in the topic list")
    # still typeable
    topic.fill("AnyTopicName")
    expect()(topic).to_have_value("AnyTopicName")


def test_nav_bar_folds_on_a_narrow_screen(browser: Any, console: ConsoleProcess, shots: Any) -> None:
    ctx = browser.new_context(viewport={"width": 390, "height": 800}, base_url=console.url)
    pg = ctx.new_page()
    try:
        pg.goto("/#/topics")
        log_in(pg)
        expect()(pg.locator("main[data-page='topics']")).to_be_visible()
        expect()(pg.locator("#nav")).to_be_hidden()
        toggle = pg.locator("#nav-toggle")
        expect()(toggle).to_be_visible()
        toggle.click()
        expect()(pg.locator("#nav")).to_be_visible()
        for box in [pg.locator("#nav a").nth(i).bounding_box() for i in range(pg.locator("#nav a").count())]:
            if box is not None:  # (the ACL link is shown to admins: USER is one)
                assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
        header = pg.locator("header.top").bounding_box()
        assert header is not None and header["width"] <= 390
        shots(pg, "console-narrow")
        pg.locator("#nav a[data-page=dlq]").click()
        expect()(pg.locator("main[data-page='dlq']")).to_be_visible()
        expect()(pg.locator("#nav")).to_be_hidden()
        assert pg.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        ctx.close()


# -- ACL: its own cluster (aclEnable=true) and console (an admin and a read-only account) -------


@pytest.fixture(scope="module")
def acl_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    d = tmp_path_factory.mktemp("console-acl")
    home = d / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    users = d / "users.properties"
    users.write_text(f"{READER}={hash_password(PASSWORD)},0\n")
    with StandaloneProcess(d / "store", extra_args=["--aclEnable=true", f"--rocketmqHome={home}"]) as proc:
        c = ConsoleProcess(
            proc.namesrv_addr,
            d,
            extra_args=("--users-file", str(users), "--access-key", ACL_ADMIN, "--secret-key", ACL_SECRET),
        ).start()
        try:
            yield c
        finally:
            assert c.stop() == 0, c.log_text()[-2000:]


def _acl_page(browser: Any, console: ConsoleProcess, user: str) -> Any:
    ctx = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=console.url)
    pg = ctx.new_page()
    pg.on("dialog", lambda d: d.accept())
    pg.goto("/#/acl")
    log_in(pg, user, PASSWORD)
    expect()(pg.locator("main[data-page='acl']")).to_be_visible()
    return pg


def test_acl_page_manages_accounts_and_white_list(browser: Any, acl_console: ConsoleProcess, shots: Any) -> None:
    pg = _acl_page(browser, acl_console, USER)
    try:
        expect()(pg.locator("#acl-accounts")).to_contain_text("plainUser")
        expect()(pg.locator("#acl-accounts")).to_contain_text(ACL_ADMIN)
        assert ACL_SECRET not in pg.content()
        expect()(pg.locator("#acl-white")).to_have_value("10.10.103.*")
        # create
        f = pg.locator("#acl-form")
        f.locator("input[name=accessKey]").fill("pageAccount1")
        f.locator("input[name=secretKey]").fill("page-secret-1")
        f.locator("select[name=defaultTopicPerm]").select_option("PUB")
        f.locator("textarea[name=topicPerms]").fill("TopicX=PUB|SUB\nTopicY=SUB")
        f.locator("button[type=submit]").click()
        expect()(pg.locator("#acl-result .notice")).to_contain_text("Account pageAccount1 written")
        row = pg.locator("#acl-accounts tr", has_text="pageAccount1")
        expect()(row).to_contain_text("TopicX=PUB|SUB TopicY=SUB")
        # edit (the secret left empty: kept)
        row.locator("button[data-action=edit]").click()
        f = pg.locator("#acl-form")
        expect()(f.locator("input[name=accessKey]")).to_have_value("pageAccount1")
        f.locator("select[name=defaultGroupPerm]").select_option("SUB")
        f.locator("input[name=admin]").check()
        f.locator("button[type=submit]").click()
        expect()(pg.locator("#acl-result .notice")).to_contain_text("Account pageAccount1 written")
        expect()(pg.locator("#acl-accounts tr", has_text="pageAccount1")).to_contain_text("admin")
        # white list
        pg.locator("#acl-white").fill("10.10.103.*\n192.168.0.*")
        pg.locator("#acl-white-save").click()
        expect()(pg.locator("#acl-white-result .notice")).to_contain_text("White list written")
        shots(pg, "console-acl")
        # delete
        pg.locator("#acl-accounts tr", has_text="pageAccount1").locator("button[data-action=delete]").click()
        expect()(pg.locator("#acl-result .notice")).to_contain_text("Account pageAccount1 deleted")
        expect()(pg.locator("#acl-accounts")).not_to_contain_text("pageAccount1")
        pg.reload()
        expect()(pg.locator("#acl-white")).to_have_value("10.10.103.*\n192.168.0.*")
        no_errors(pg)
    finally:
        pg.context.close()


def test_a_read_only_account_does_not_see_the_acl_page(browser: Any, acl_console: ConsoleProcess) -> None:
    pg = _acl_page(browser, acl_console, READER)
    try:
        expect()(pg.locator("main .error")).to_contain_text("The ACL page is for admin accounts.")
        expect()(pg.locator("#nav a[data-page=acl]")).to_be_hidden()
        expect()(pg.locator("#read-only")).to_have_text("read-only")
        expect()(pg.locator("#nav a[data-page=topics]")).to_be_visible()
        # a write from this session is refused by the server, whatever the page shows
        open_page(pg, "groups", "groups")
        pg.locator("#group-form input[name=group]").fill("ReaderGroup")
        pg.locator("#group-form button[type=submit]").click()
        expect()(pg.locator("main .error").first).to_contain_text("read-only account")
    finally:
        pg.context.close()


def test_acl_page_says_acl_is_off(page: Any) -> None:
    open_page(page, "acl", "acl")
    expect()(page.locator("#acl-off")).to_contain_text("ACL is off on every broker (aclEnable=false)")
    expect()(page.locator("#acl-brokers")).to_contain_text("off")
