"""rmq.Admin's public surface: every public method documented and typed, the module exports
what it declares, and the constructor's checks."""

from __future__ import annotations

import inspect
import typing

import pytest

import rmq.client.admin as admin_mod
from rmq.client.admin import Admin, AdminError


def _public_methods() -> list[str]:
    return sorted(n for n, v in inspect.getmembers(Admin) if not n.startswith("_") and callable(v))


def test_admin_has_the_topic_methods():
    names = set(_public_methods())
    assert {
        "examine_topic_stats",
        "get_topic_cluster_list",
        "fetch_topics_by_cluster",
        "query_topic_consume_by_who",
        "examine_topic_consumers",
        "update_topic_perm",
        "allocate_mq",
        "send_message",
        "check_msg_send_rt",
        "pull",
        "iter_pull",
        "min_offset",
        "max_offset",
        "search_offset",
        "fetch_subscribe_message_queues",
        "create_and_update_topic_config",
        "create_and_update_subscription_group_config",
    } <= names


@pytest.mark.parametrize("name", _public_methods())
def test_every_public_method_has_a_docstring_and_a_typed_signature(name):
    fn = getattr(Admin, name)
    assert inspect.getdoc(fn), f"Admin.{name} has no docstring"
    hints = typing.get_type_hints(fn)
    assert "return" in hints, f"Admin.{name} does not declare what it returns"
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]
    assert all(p.name in hints for p in params), f"Admin.{name} has untyped parameters"


def test_the_class_and_module_are_documented_and_export_what_they_declare():
    assert inspect.getdoc(Admin) and admin_mod.__doc__ and "async with Admin(" in admin_mod.__doc__
    for name in admin_mod.__all__:
        assert getattr(admin_mod, name) is not None


def test_namesrv_addr_from_the_argument_or_the_environment(monkeypatch):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(ValueError, match="NAMESRV_ADDR"):
        Admin()
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876;10.0.0.2:9876")
    assert Admin().namesrv_addrs == ["10.0.0.1:9876", "10.0.0.2:9876"]
    assert Admin("127.0.0.1:1").namesrv_addrs == ["127.0.0.1:1"]
    with pytest.raises(ValueError, match="timeout"):
        Admin("127.0.0.1:1", timeout=0)


def test_admin_error_keeps_code_remark_and_address():
    e = AdminError("refused", code=17, remark="no route", addr="1.2.3.4:10911")
    assert (str(e), e.code, e.remark, e.addr) == ("refused", 17, "no route", "1.2.3.4:10911")
