"""Configuration checked at start: every numeric property against the range its field declares,
unknown keys an error with a suggestion, Java .properties escapes decoded."""

import dataclasses
import subprocess
import sys
import typing

import pytest

from rmq.common.settings import JAVA_LONG, allowed_of, setting
from rmq.config import BrokerConfig, ConfigError, NamesrvConfig, apply_properties, check_config, load_properties
from rmq.store import StoreConfig

RMQ = [sys.executable, "-m", "rmq"]


def run(args, timeout=60):
    return subprocess.run(RMQ + args, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    "prop,value,allowed",
    [
        ("defaultTopicQueueNums", "-3", "1..1024"),
        ("maxMessageSize", "-1", "1..1073741824"),
        ("brokerPermission", "9", "one of 2, 4, 6"),
        ("fileReservedTime", "-5", "0..87600 hours"),
        ("deleteWhen", "25", "0..23"),
        ("listenPort", "70000", "0..65535"),
        ("mappedFileSizeConsumeQueue", "30", "multiple of 20"),
        ("diskMaxUsedSpaceRatio", "101", "0..100"),
        ("flushDiskType", "SOMETIMES", "ASYNC_FLUSH, SYNC_FLUSH"),
    ],
)
def test_out_of_range_property_stops_start_with_status_2(tmp_path, prop, value, allowed):
    r = run(["standalone", "--namesrv-port=0", "--broker-port=0", f"--store-dir={tmp_path / 's'}", f"--{prop}={value}"])
    assert r.returncode == 2, r.stderr[-2000:]
    assert prop in r.stderr and allowed in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())  # nothing was started


def test_broker_conf_file_value_out_of_range(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path / 's'}\nbrokerPermission = 9\n")
    r = run(["broker", "-c", str(conf)])
    assert r.returncode == 2 and "brokerPermission" in r.stderr and "2, 4, 6" in r.stderr


def test_unknown_property_suggests_the_closest_and_lenient_only_warns(tmp_path):
    r = run(["standalone", f"--store-dir={tmp_path / 's'}", "--flushDiskTyp=SYNC_FLUSH"])
    assert r.returncode == 2 and "did you mean flushDiskType?" in r.stderr and "--lenient-config" in r.stderr
    with pytest.raises(ConfigError, match="did you mean defaultTopicQueueNums"):
        apply_properties({"defaultTopicQueueNum": "4"}, BrokerConfig(), StoreConfig())
    with pytest.raises(ConfigError) as e:
        apply_properties({"zzzzzz": "4"}, BrokerConfig(), StoreConfig())
    assert "did you mean" not in str(e.value)
    bc = BrokerConfig()
    warnings = apply_properties({"lenientConfig": "true", "defaultTopicQueueNum": "4", "brokerName": "b"}, bc)
    assert warnings == ["unknown config key 'defaultTopicQueueNum'; did you mean defaultTopicQueueNums? (ignored)"]
    assert bc.lenient_config and bc.broker_name == "b"
    # lenient does not excuse a bad value
    with pytest.raises(ConfigError, match="defaultTopicQueueNums"):
        apply_properties({"defaultTopicQueueNums": "0"}, BrokerConfig(), lenient=True)


def test_java_properties_escapes_and_continuations(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_bytes(
        b"# comment\n"
        b"namesrvAddr=127.0.0.1\\:9876;127.0.0.1\\:9877\n"
        b"brokerName = broker\\u002Da\n"
        b"brokerClusterName : Cluster\\ One\n"
        b"messageDelayLevel=1s 5s \\\n"
        b"    10s 1m\n"
        b"key\\=with\\:sep=v\n"
    )
    props = load_properties(str(conf))
    assert props["namesrvAddr"] == "127.0.0.1:9876;127.0.0.1:9877"
    assert props["brokerName"] == "broker-a"
    assert props["brokerClusterName"] == "Cluster One"
    assert props["messageDelayLevel"] == "1s 5s 10s 1m"
    assert props["key=with:sep"] == "v"
    bc, sc = BrokerConfig(), StoreConfig()
    del props["key=with:sep"]
    apply_properties(props, bc, sc)
    assert bc.namesrv_addr_list == ["127.0.0.1:9876", "127.0.0.1:9877"]
    assert sc.delay_level_millis() == [1000, 5000, 10_000, 60_000]


def test_every_numeric_field_is_range_checked():
    """Declared ranges where the RocketMQ user needs them; a Java long at the least."""
    for cfg in (BrokerConfig(), StoreConfig(), NamesrvConfig()):
        hints = typing.get_type_hints(type(cfg))
        for f in dataclasses.fields(cfg):
            if hints[f.name] in (int, float):
                assert allowed_of(f, hints[f.name]) is not None, f.name
        check_config(cfg)  # the defaults are within their own ranges
    declared = {f.name for cfg in (BrokerConfig, StoreConfig) for f in dataclasses.fields(cfg) if f.metadata}
    assert {
        "default_topic_queue_nums",
        "broker_permission",
        "max_message_size",
        "file_reserved_time",
        "delete_when",
        "listen_port",
        "mapped_file_size_commitlog",
    } <= declared


def test_field_without_a_declared_range_still_works():
    """Engineers append plain fields; they load, and still cannot hold what Java could not."""

    @dataclasses.dataclass
    class Cfg:
        ranged: int = setting(5, lo=1, hi=10)
        plain: int = 3
        plain_float: float = 1.5
        plain_text: str = "x"

    c = Cfg()
    assert apply_properties({"plain": "-7", "plainFloat": "2.5", "plainText": "y", "ranged": "10"}, c) == []
    assert (c.plain, c.plain_float, c.plain_text, c.ranged) == (-7, 2.5, "y", 10)
    assert allowed_of(dataclasses.fields(Cfg)[1], int) is JAVA_LONG
    with pytest.raises(ConfigError, match=r"plain: '18446744073709551616'"):
        apply_properties({"plain": str(2**64)}, c)
    with pytest.raises(ConfigError, match="plainFloat.*finite"):
        apply_properties({"plainFloat": "inf"}, c)
    with pytest.raises(ConfigError, match=r"ranged.*1\.\.10"):
        apply_properties({"ranged": "11"}, c)
    c.ranged = 0  # set in code, past the range: check_config at start catches it
    with pytest.raises(ConfigError, match="bad value for ranged: 0"):
        check_config(c)


def test_namesrv_port_flag_checked():
    r = run(["namesrv", "--port", "70000"])
    assert r.returncode == 2 and "--port" in r.stderr and "0..65535" in r.stderr


def test_properties_text_codec_is_javas():
    """format_properties is Java MixAll.properties2String (None left out, booleans true/false,
    no escaping); parse_properties is string2Properties and reads it back, from bytes too."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from rmq.config import format_properties, parse_properties

    text = format_properties({"a": True, "b": 1, "c": None, "d": "x=y", "e": False, "f": 2.5})
    assert text == "a=true\nb=1\nd=x=y\ne=false\nf=2.5\n"
    assert parse_properties(text.encode()) == {"a": "true", "b": "1", "d": "x=y", "e": "false", "f": "2.5"}
    with pytest.raises(ConfigError, match="not UTF-8"):
        parse_properties(b"a=\xff\xfe")

    keys = st.from_regex(r"[A-Za-z][A-Za-z0-9_.]{0,15}", fullmatch=True)
    values = (
        st.text(st.characters(blacklist_characters="\\\r\n\f", blacklist_categories=("Cs", "Zs", "Cc")), max_size=20)
        | st.booleans()
        | st.integers()
    )

    @given(st.dictionaries(keys, values, max_size=8))
    @settings(max_examples=150, deadline=None)
    def round_trip(props):
        expect = {k: ("true" if v else "false") if isinstance(v, bool) else str(v) for k, v in props.items()}
        assert parse_properties(format_properties(props)) == expect

    round_trip()


async def test_runtime_configuration_checks_whole_applies_and_persists(tmp_path):
    """rmq.config.Configuration (Java Configuration): black list, start-up-only keys, unknown
    keys and bad values refuse the whole update; an accepted one is applied, announced once and
    written into the file in place (values escaped as Properties.store)."""
    from rmq.config import ConfigUpdateRefused, Configuration, NamesrvConfig

    conf = tmp_path / "n.conf"
    conf.write_text("# mine\nmax_topics = 1\nlistenPort=1\n")
    seen = []

    class Conf(Configuration):
        live = frozenset({"maxTopics", "maxBrokers", "kvConfigPath"})
        black_list = frozenset({"configStorePath"})

        def path(self):
            return str(conf)

        async def changed(self, applied):
            seen.append(dict(applied))

    cfg = NamesrvConfig()
    c = Conf(cfg)
    for props, match in (
        ({"configStorePath": "x"}, "black list"),
        ({"listenPort": "5"}, "cannot be changed"),
        ({"maxTopics": "9", "maxBrokerz": "1"}, "did you mean maxBrokers"),
        ({"maxTopics": "9", "maxBrokers": "0"}, "maxBrokers"),
    ):
        with pytest.raises(ConfigUpdateRefused, match=match) as e:
            await c.update(props)
        assert e.value.black_list == (match == "black list")
    assert cfg.max_topics == NamesrvConfig().max_topics and seen == [] and conf.read_text().startswith("# mine\nmax_")
    assert await c.update({"max_topics": "9", "maxBrokers": "7", "kvConfigPath": " a\\b"}) == {
        "maxTopics": "9",
        "maxBrokers": "7",
        "kvConfigPath": "a\\b",
    }
    assert (cfg.max_topics, cfg.max_brokers, seen) == (
        9,
        7,
        [{"maxTopics": "9", "maxBrokers": "7", "kvConfigPath": "a\\b"}],
    )
    assert conf.read_text() == "# mine\nmaxTopics=9\nlistenPort=1\nmaxBrokers=7\nkvConfigPath=a\\\\b\n"
    assert load_properties(str(conf))["kvConfigPath"] == "a\\b"
    assert "maxTopics=9\n" in c.get_all_configs_format_string()


@pytest.mark.parametrize(
    "props,prop,allowed",
    [
        (["--brokerRole=SLAVE", "--controllerAddr=127.0.0.1:9878"], "brokerRole", "ASYNC_MASTER or SYNC_MASTER"),
        ([], "controllerAddr", "host:port of the controllers"),
    ],
)
def test_controller_mode_contradictions_stop_the_broker(tmp_path, props, prop, allowed):
    r = run(["broker", f"--storePathRootDir={tmp_path / 's'}", "--enableControllerMode=true", *props])
    assert r.returncode == 2, r.stderr[-2000:]
    assert prop in r.stderr and allowed in r.stderr and "Traceback" not in r.stderr
