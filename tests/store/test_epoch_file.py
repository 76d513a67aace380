"""The epoch file (Java 5 EpochFileCache / CheckpointFile): format, atomic replacement,
the consistent point two replicas agree on."""

import os

import pytest

from rmq.store.ha.epoch import EPOCH_FILE_NAME, MAX_ENTRIES, EpochEntry, EpochFile, find_consistent_point


def test_java_checkpoint_format_round_trip(tmp_path):
    f = EpochFile(str(tmp_path))
    assert f.append(7, 7000) and f.append(8, 8000)
    f.save()
    text = (tmp_path / EPOCH_FILE_NAME).read_text()
    # Java CheckpointFile: count, crc32 of the entry lines, then epoch-startOffset per line
    assert text.splitlines()[0] == "2" and text.splitlines()[2:] == ["7-7000", "8-8000"]
    assert int(text.splitlines()[1]) == 773307083  # the crc in Java's javadoc example
    g = EpochFile(str(tmp_path))
    g.load()
    assert g.entries == [EpochEntry(7, 7000), EpochEntry(8, 8000)] and g.last_epoch == 8
    assert g.with_ends(9000) == [(7, 7000, 8000), (8, 8000, 9000)]
    assert g.find_by_offset(7999, 9000) == EpochEntry(7, 7000) and g.find_by_offset(9000, 9000) is None


def test_reads_the_java_example_and_refuses_a_bad_crc(tmp_path):
    # The example in Java's CheckpointFile javadoc, byte for byte.
    (tmp_path / EPOCH_FILE_NAME).write_text("2\n773307083\n7-7000\n8-8000\n")
    f = EpochFile(str(tmp_path))
    f.load()
    assert f.entries == [EpochEntry(7, 7000), EpochEntry(8, 8000)]
    (tmp_path / EPOCH_FILE_NAME).write_text("2\n773307084\n7-7000\n8-8000\n")
    with pytest.raises(ValueError, match="crc32"):
        EpochFile(str(tmp_path)).load()


def test_a_torn_file_falls_back_to_the_backup(tmp_path):
    f = EpochFile(str(tmp_path))
    f.append(1, 0)
    f.append(2, 4096)
    f.save()
    (tmp_path / EPOCH_FILE_NAME).write_bytes(b"2\n1234")  # torn / overwritten
    g = EpochFile(str(tmp_path))
    g.load()
    assert g.entries == [EpochEntry(1, 0), EpochEntry(2, 4096)]
    assert not os.path.exists(str(tmp_path / (EPOCH_FILE_NAME + ".tmp")))


def test_append_only_grows_and_is_bounded(tmp_path):
    f = EpochFile(str(tmp_path))
    assert f.append(3, 100)
    assert not f.append(3, 200) and not f.append(2, 300) and not f.append(4, 50)
    assert f.append(4, 100)  # an epoch that wrote nothing stays, as an empty range
    assert f.entries == [EpochEntry(3, 100), EpochEntry(4, 100)]
    assert f.with_ends(150) == [(3, 100, 100), (4, 100, 150)]
    for e in range(5, 5 + MAX_ENTRIES + 10):
        assert f.append(e, e * 1000)
    assert len(f.entries) == MAX_ENTRIES and f.entries[-1].epoch == 4 + MAX_ENTRIES + 10


def test_truncations():
    f = EpochFile("/nonexistent")
    for ep, st in ((1, 0), (2, 100), (3, 250), (5, 400)):
        f.append(ep, st)
    f.truncate_suffix_by_offset(250)
    assert [e.epoch for e in f.entries] == [1, 2]
    f.append(3, 260)
    f.truncate_suffix_by_epoch(3)
    assert [e.epoch for e in f.entries] == [1, 2]
    f.truncate_prefix(150, 300)  # epoch 1 ends at 100 <= 150: its data is gone
    assert f.entries == [EpochEntry(2, 100)]


@pytest.mark.parametrize(
    "local, local_end, remote, remote_end, point",
    [
        # the same history: the lower end
        ([(1, 0), (2, 100)], 180, [(1, 0), (2, 100)], 250, 180),
        # the old master wrote on in epoch 2 after the slave became master in epoch 3
        ([(1, 0), (2, 100)], 300, [(1, 0), (2, 100), (3, 200)], 400, 200),
        # the same epoch number with another start is not common
        ([(1, 0), (2, 120)], 300, [(1, 0), (2, 100)], 400, 100),
        # nothing in common
        ([(4, 0)], 10, [(5, 0)], 20, -1),
        # an epoch whose master wrote nothing, then the next master: in common at 0
        ([(1, 0)], 0, [(1, 0), (2, 0)], 300, 0),
    ],
)
def test_find_consistent_point(local, local_end, remote, remote_end, point):
    loc = [EpochEntry(*e) for e in local]
    rem = [EpochEntry(*e) for e in remote]
    assert find_consistent_point(loc, local_end, rem, remote_end) == point


def test_the_epoch_answer_codec_is_bounded():
    from rmq.store.ha.codec import (
        MAX_EPOCH_ENTRIES,
        HAProtocolError,
        decode_epoch_answer,
        encode_epoch_answer,
        encode_epoch_hello,
    )

    data = encode_epoch_answer([(1, 0), (2, 0), (3, 4096)], 8192)
    assert decode_epoch_answer(data[:-1]) is None  # incomplete: wait for more
    assert decode_epoch_answer(data) == ([(1, 0), (2, 0), (3, 4096)], 8192, len(data))
    assert len(encode_epoch_hello(7)) == 16
    with pytest.raises(HAProtocolError, match="entries"):
        decode_epoch_answer((MAX_EPOCH_ENTRIES + 1).to_bytes(4, "big"))  # refused before buffering more
    with pytest.raises(HAProtocolError, match="out of order"):
        decode_epoch_answer(encode_epoch_answer([(2, 0), (1, 10)], 20))
    with pytest.raises(HAProtocolError, match="out of order"):
        decode_epoch_answer(encode_epoch_answer([(1, 0), (2, 30)], 20))  # starts past the end
