"""FISH's time-evolving ZF stream (`zf:`): a fresh ranking every block, moved once more within each block."""

from __future__ import annotations

import numpy as np
import pytest

from topo.data.streamspec import StreamError, parse_stream_spec, zf_epochs


def test_two_epochs_per_block_the_second_from_hot_after_on():
    assert zf_epochs(10, 0.8, 0, 25).tolist() == [0] * 8 + [1] * 2 + [2] * 8 + [3] * 2 + [4] * 5
    assert zf_epochs(10, 1.0, 5, 25).tolist() == [0] * 5 + [2] * 10 + [4] * 5  # no move within a block
    assert zf_epochs(10, 0.8, 18, 21).tolist() == [3, 3, 4]  # any range: the same epochs as the whole


def _top(ids: np.ndarray) -> int:
    return int(np.bincount(ids).argmax())


def test_the_hot_key_moves_after_80_percent_of_each_block_and_at_each_block():
    spec = parse_stream_spec("zf:z=1.5,keys=100000,messages=40000,block=10000,hot_after=0.8,seed=3")
    ids = spec.sample()
    tops = [_top(ids[a:b]) for a, b in ((0, 8000), (8000, 10000), (10000, 18000), (18000, 20000))]
    assert len(set(tops)) == 4
    # and the stream is the same however it is cut
    assert np.array_equal(np.concatenate([spec.sample(0, 12345), spec.sample(12345, 40000)]), ids)


def test_one_block_without_a_move_is_the_plain_zipf_stream():
    zf = parse_stream_spec("zf:z=1.2,keys=1000,messages=5000,block=5000,hot_after=1,seed=9").sample()
    zipf = parse_stream_spec("zipf:z=1.2,keys=1000,messages=5000,seed=9").sample()
    assert np.array_equal(zf, zipf)


@pytest.mark.parametrize("bad, says", [
    ("zf:z=1.2,keys=10,messages=50,block=10,hot_after=1.5", "hot_after is a share of the block, at most 1"),
    ("zf:z=1.2,keys=10,messages=50,block=0,hot_after=0.8", "block must be at least 1"),
    ("zf:z=1.2,keys=10,messages=50,hot_after=0.8", "missing parameter block"),
])
def test_bad_zf_specs_say_what_is_wrong(bad, says):
    with pytest.raises(StreamError, match=says):
        parse_stream_spec(bad)
