"""kvlab.traffic: Mooncake reading, block hashing and the sequence clock, counted by hand."""

import json

import pytest

from kvlab.core.kv_cache_utils import get_request_block_hasher
from kvlab.core.hashing import sha256
from kvlab.core.request import Request, SamplingParams
from kvlab.traffic import (
    infinite_hits,
    prepare_blocks,
    read_mooncake_lines,
    replay_sequence,
    synthesize_tokens,
)


def _line(ts, n_in, ids, n_out=1):
    return json.dumps({"timestamp": ts, "input_length": n_in, "output_length": n_out,
                       "hash_ids": ids})


# A: 2 full blocks; B shares block 0 and 1, adds a partial one; C shares block 0 only.
LINES = [_line(0, 1024, [0, 1]), _line(1, 1100, [0, 1, 2]), _line(2, 600, [0, 3])]


@pytest.mark.parametrize("cache", ["vllm", "nano", "radix", "infinite"])
def test_hits_counted_by_hand_block_512(cache):
    reqs = read_mooncake_lines(LINES)
    res = replay_sequence(prepare_blocks(reqs, 512), cache, 8 * 512)
    # A: nothing cached. B: blocks 0, 1 (1024 <= 1099 cap). C: block 0 (cap (599)//512 = 1).
    assert res.per_request_hit_tokens == [0, 1024, 512]
    assert res.prompt_tokens == 1024 + 1100 + 600
    assert res.hit_rate == pytest.approx(1536 / 2724)


@pytest.mark.parametrize("cache", ["vllm", "nano", "radix"])
def test_small_pool_evicts(cache):
    reqs = read_mooncake_lines(LINES)
    # 2 blocks: A fills both; B needs 3 blocks -> rejected; C hits block 0.
    res = replay_sequence(prepare_blocks(reqs, 512), cache, 2 * 512)
    assert res.rejected == 1
    assert res.per_request_hit_tokens == [0, 0, 512]


def test_block_size_16_hits_partial_tail_blocks():
    reqs = read_mooncake_lines(LINES)
    res = replay_sequence(prepare_blocks(reqs, 16), "vllm", 10_000)
    # B: 1024 of A's tokens; C: block 0 (512 tokens) then its own id 3.
    assert res.per_request_hit_tokens == [0, 1024, 512]


def test_memoized_hashes_equal_real_hashing_of_synthesized_tokens():
    reqs = read_mooncake_lines(LINES)
    for bs in (16, 64, 512):
        b = prepare_blocks(reqs, bs)
        for i, req in enumerate(reqs):
            r = Request(req.request_id, synthesize_tokens(req), SamplingParams(max_tokens=1),
                        None, block_hasher=get_request_block_hasher(bs, sha256))
            assert r.block_hashes == b.block_hashes[i]


def test_infinite_equals_vllm_with_room_for_everything_and_direct_count():
    lines = [_line(i, 512 * (1 + i % 3) + 7, [0] + [100 * i + k + 1 for k in range(i % 3 + 1)])
             for i in range(12)]
    b = prepare_blocks(read_mooncake_lines(lines), 64)
    big = replay_sequence(b, "vllm", 10**6)
    assert big.per_request_hit_tokens == infinite_hits(b)
    # Direct count: every request after the first repeats exactly hash id 0 (512 tokens).
    assert infinite_hits(b) == [0] + [512] * 11


@pytest.mark.parametrize(
    ("line", "msg"),
    [
        ("{nope", "line 2: not JSON"),
        (_line(0, 1024, [0]), "line 2: hash_ids has 1 ids but input_length 1024 needs"),
        ('{"timestamp": 0}', "line 2: missing 'input_length'"),
        (_line(0, 600, [5, 1]), "line 2: hash id 1 follows id 5 here but id 0 before"),
    ],
)
def test_bad_lines_name_the_line(line, msg):
    with pytest.raises(ValueError, match=msg):
        read_mooncake_lines([LINES[0], line])


def test_capacity_below_one_block_and_unknown_cache():
    b = prepare_blocks(read_mooncake_lines(LINES), 16)
    with pytest.raises(ValueError, match="below one block"):
        replay_sequence(b, "vllm", 8)
    with pytest.raises(ValueError, match="unknown cache 'lfu'"):
        replay_sequence(b, "lfu", 1024)
    with pytest.raises(ValueError, match="does not divide"):
        prepare_blocks(read_mooncake_lines(LINES), 48)
