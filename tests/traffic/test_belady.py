"""Belady's eviction under vLLM's rules: counted by hand, the ceiling, and never below LRU."""

import random

import pytest

from kvlab.traffic import infinite_hits, prepare_blocks, read_mooncake_lines
from kvlab.traffic.belady import NEVER, belady, next_uses
from kvlab.traffic.stack import lru_curve
from kvlab.traffic.synthetic import random_mooncake_lines


def _line(n_in, ids):
    return f'{{"timestamp": 0, "input_length": {n_in}, "output_length": 1, "hash_ids": {ids}}}'


# A's blocks are wanted again by D, B's never; C needs room in a 4-block pool.
LINES = [_line(1024, [0, 1]), _line(1024, [2, 3]), _line(600, [6, 7]), _line(1100, [0, 1, 5])]


def test_belady_keeps_what_is_needed_next_where_lru_does_not():
    b = prepare_blocks(read_mooncake_lines(LINES), 512)
    res = belady(b, 4 * 512)
    assert res.per_request_hit_tokens == [0, 0, 0, 1024]
    assert res.evicted_blocks == 2  # NOTE: B's two blocks, never used again
    assert lru_curve(b, [4 * 512])[0].per_request_hit_tokens == [0, 0, 0, 0]


def test_next_uses_skip_refused_requests_and_the_capped_block():
    b = prepare_blocks(read_mooncake_lines(LINES + [_line(1024, [0, 1])]), 512)
    uses = next_uses(b)
    # A's block 0 is next looked up by D (3); A's block 1 by D too; E (aligned) looks up only
    # block 0, so after D block 1 is never looked up again.
    assert uses[0] == [3, 3] and uses[3] == [4, NEVER]
    assert next_uses(b, num_blocks=2)[0] == [4, NEVER]  # NOTE: D (3 blocks) is refused at 2


@pytest.mark.parametrize("seed", range(8))
def test_belady_reaches_the_infinite_cache_and_never_trails_lru(seed):
    rng = random.Random(seed)
    b = prepare_blocks(read_mooncake_lines(random_mooncake_lines(rng, 40)), rng.choice([16, 64]))
    assert belady(b, 10**7).per_request_hit_tokens == infinite_hits(b)
    caps = [b.block_size * k for k in (2, 5, 10, 20, 40, 80)]
    for cap, lru in zip(caps, lru_curve(b, caps), strict=True):
        res = belady(b, cap)
        assert res.rejected == lru.rejected
        assert sum(res.per_request_hit_tokens) >= sum(lru.per_request_hit_tokens)


def test_belady_refuses_a_capacity_below_one_block():
    b = prepare_blocks(read_mooncake_lines(LINES), 512)
    with pytest.raises(ValueError, match="capacity 500 tokens is below one block"):
        belady(b, 500)


def test_bypass_keeps_the_pool_for_what_is_needed_again():
    # A's two blocks are needed by C; B's never. At 2 blocks vLLM's rules must make room for B
    # (its blocks hold its KV cache while it runs); as a pure cache with admission, B's blocks
    # are simply not cached (kvcache-simulator's "optimal" answers this question).
    b = prepare_blocks(read_mooncake_lines([_line(1024, [0, 1]), _line(1024, [2, 3]),
                                            _line(1100, [0, 1, 4])]), 512)
    assert belady(b, 2 * 512).per_request_hit_tokens == [0, 0, 0]
    res = belady(b, 2 * 512, bypass=True)
    assert (res.per_request_hit_tokens, res.evicted_blocks) == ([0, 0, 1024], 0)
    # Nothing is refused as a pure cache: the running request is held outside the pool.
    big = prepare_blocks(read_mooncake_lines([_line(1536, [0, 1, 2]), _line(1536, [0, 1, 2])]),
                         512)
    assert belady(big, 2 * 512).rejected == 2
    assert belady(big, 2 * 512, bypass=True).per_request_hit_tokens == [0, 1024]
