"""Property tests of the properties string codec (rmq.common.message string_to_properties /
properties_to_string, Java MessageDecoder.string2messageProperties / messageProperties2String)
and of the store's Cython reader of it (rmq._store.find_property, tags_code_of_properties)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rmq import _store
from rmq.common.message import (
    java_string_hash,
    properties_to_string,
    string_to_properties,
)

SETTINGS = settings(max_examples=300, deadline=None)

_chars = st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",))
_props = st.dictionaries(st.text(_chars, min_size=1, max_size=10), st.text(_chars, max_size=20), max_size=8)


@SETTINGS
@given(props=_props, trailing=st.booleans())
def test_round_trip_in_both_forms(props, trailing):
    s = properties_to_string(props, trailing_separator=trailing)
    assert string_to_properties(s) == props
    assert string_to_properties(s.encode()) == props
    assert string_to_properties(memoryview(s.encode())) == props
    # the checked form refuses nothing that has no separator in it
    assert properties_to_string(props, trailing_separator=trailing, check_separators=True) == s


@SETTINGS
@given(props=_props, trailing=st.booleans())
def test_the_store_reads_the_same_values(props, trailing):
    raw = properties_to_string(props, trailing_separator=trailing).encode()
    for k, v in props.items():
        assert _store.find_property(raw, k) == v.encode()
    tags = props.get("TAGS")
    assert _store.tags_code_of_properties(raw) == (java_string_hash(tags) if tags else 0)


@SETTINGS
@given(text=st.text(st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_any_text_parses_leniently(text):
    got = string_to_properties(text)
    for k, v in got.items():
        assert k and "\x02" not in k and "\x01" not in k and "\x02" not in v
    # bytes that are not UTF-8 are read with replacement, never an error
    string_to_properties(text.encode() + b"\xff\xfe")
