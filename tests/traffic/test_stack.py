"""The one-pass LRU curve and the O(1) per-capacity cache, against kvlab.core and nano-vllm."""

import random

import pytest

from kvlab.traffic import prepare_blocks, read_mooncake_lines, replay_sequence
from kvlab.traffic.blocks import _hash_ids_blocks, ensure_none_hash
from kvlab.traffic.lru import LRUPrefixCache
from kvlab.traffic.replay import EvictionCounter, make_vllm_manager, vllm_request
from kvlab.traffic.stack import lru_curve
from kvlab.traffic.synthetic import random_mooncake_lines


def _line(ts, n_in, ids):
    return (f'{{"timestamp": {ts}, "input_length": {n_in}, "output_length": 1, '
            f'"hash_ids": {list(ids)}}}')


def test_curve_counted_by_hand_with_refusal_and_second_copy():
    # A: 2 aligned blocks. B = A again (aligned, cached: vLLM looks up 1 block, allocates the
    # last one again). C: 5 blocks (refused by a 4-block pool). D: A's first block + its own.
    lines = [_line(0, 1024, [0, 1]), _line(1, 1024, [0, 1]), _line(2, 2560, [2, 3, 4, 5, 6]),
             _line(3, 600, [0, 7])]
    b = prepare_blocks(read_mooncake_lines(lines), 512)
    small, big = lru_curve(b, [4 * 512, 100 * 512])
    assert small.per_request_hit_tokens == [0, 512, 0, 512]
    assert small.rejected == 1 and small.replayed_from == 1  # NOTE: the second copy at 4 blocks
    assert big.per_request_hit_tokens == [0, 512, 0, 512]
    assert big.replayed_from == 1 and big.rejected == 0


def _core_replay(b, num_blocks):
    """kvlab.core run by hand: per request its hit and its block ids."""
    ensure_none_hash()
    mgr = make_vllm_manager(num_blocks, b.block_size, EvictionCounter())
    out = []
    for req, hashes in zip(b.requests, b.block_hashes, strict=True):
        r = vllm_request(req, hashes)
        blocks, hit = mgr.get_computed_blocks(r)
        got = mgr.allocate_slots(r, r.num_tokens - hit, hit, blocks)
        if got is None:
            out.append((-1, []))
            continue
        out.append((hit, list(mgr.get_block_ids(r.request_id)[0])))
        from kvlab.core.request import RequestStatus

        r.status = RequestStatus.FINISHED_LENGTH_CAPPED
        mgr.free(r)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_lru_cache_takes_the_same_block_ids_as_kvlab_core(seed):
    rng = random.Random(seed)
    b = prepare_blocks(read_mooncake_lines(random_mooncake_lines(rng, 30)), 64)
    for num_blocks in (8, 40, 400):
        sim = LRUPrefixCache(num_blocks, 64)
        got = []
        for keys, req in zip(b.keys, b.requests, strict=True):
            hit = sim.serve(keys, req.num_prompt_tokens)
            got.append((hit, list(sim.last_block_ids) if hit >= 0 else []))
        assert got == _core_replay(b, num_blocks)


@pytest.mark.parametrize("seed", range(3))
def test_nano_cache_takes_the_same_block_ids_as_nano_vllm(seed):
    from kvlab.nanovllm import NanoBlockManager
    from kvlab.traffic.mooncake import synthesize_tokens
    from kvlab.traffic.replay import _synth_sequence_class

    rng = random.Random(100 + seed)
    b = prepare_blocks(read_mooncake_lines(random_mooncake_lines(rng, 30)), 64)
    seq_class = _synth_sequence_class()
    for num_blocks in (8, 40, 400):
        sim = LRUPrefixCache(num_blocks, 64, cap_hit=False, first_block_id=0)
        mgr = NanoBlockManager(num_blocks, 64)
        for keys, req in zip(b.keys, b.requests, strict=True):
            hit = sim.serve(keys, req.num_prompt_tokens)
            seq = seq_class(req.request_id, synthesize_tokens(req), 64)
            if not mgr.can_allocate(seq):
                assert hit == -1
                continue
            mgr.allocate(seq)
            assert (hit, sim.last_block_ids) == (
                min(seq.num_cached_tokens, seq.num_tokens - 1), seq.block_table)
            mgr.deallocate(seq)
        assert sim.num_evicted_blocks == mgr.stats.num_evicted_blocks


@pytest.mark.parametrize("seed", range(6))
def test_one_pass_equals_replay_at_every_capacity(seed):
    rng = random.Random(seed)
    b = prepare_blocks(read_mooncake_lines(random_mooncake_lines(rng, 40)),
                       rng.choice([16, 64, 512]))
    bs = b.block_size
    caps = sorted({rng.randint(1, 80) * bs for _ in range(5)} | {bs, 10**6})
    for cache, cap_hit in (("vllm", True), ("nano", False)):
        for cap, point in zip(caps, lru_curve(b, caps, cap_hit=cap_hit), strict=True):
            want = replay_sequence(b, cache, cap)
            assert point.per_request_hit_tokens == want.per_request_hit_tokens, (cache, cap)
            assert (point.evicted_blocks, point.rejected) == (want.evicted_blocks, want.rejected)


def test_fast_keys_equal_hashed_keys():
    rng = random.Random(7)
    reqs = read_mooncake_lines(random_mooncake_lines(rng, 30))
    for bs in (16, 512):
        b = prepare_blocks(reqs, bs)
        memo, intern, keys = {}, {}, []
        ensure_none_hash()
        for r in reqs:
            from kvlab.core import sha256

            hashes = _hash_ids_blocks(r, bs, memo, sha256)
            keys.append([intern.setdefault(h, len(intern)) for h in hashes])
        assert b.keys == keys and b.num_keys == len(intern)
        assert b.block_hashes[3] == _hash_ids_blocks(reqs[3], bs, {}, sha256)


def test_capacity_below_one_block_is_refused():
    b = prepare_blocks(read_mooncake_lines([_line(0, 600, [0, 1])]), 512)
    with pytest.raises(ValueError, match="capacity 100 tokens is below one block"):
        lru_curve(b, [100])
    with pytest.raises(ValueError, match="num_blocks must be an int >= 1, got 0"):
        LRUPrefixCache(0, 16)


@pytest.mark.parametrize("seed", range(4))
def test_streaming_with_compaction_equals_the_whole_pass(seed, monkeypatch):
    from kvlab.traffic import stack
    from kvlab.traffic.blocks import hash_id_keys

    rng = random.Random(50 + seed)
    reqs = read_mooncake_lines(random_mooncake_lines(rng, 60))
    b = prepare_blocks(reqs, 64)
    caps = [64 * k for k in (3, 9, 20, 45)]
    want = lru_curve(b, caps, warmup_requests=30)
    monkeypatch.setattr(stack, "MIN_TIMES", 8)  # NOTE: compact every few requests
    curve = stack.LRUCurve(64, caps, warmup_requests=30)
    for r in reqs:  # NOTE: keys straight from hash ids (no interning, nothing kept)
        curve.feed(hash_id_keys(r, 64), r.num_prompt_tokens)
    got = curve.finish()
    for g, w in zip(got, want, strict=True):
        assert g.per_request_hit_tokens == w.per_request_hit_tokens
        assert (g.hit_tokens, g.prompt_tokens, g.evicted_blocks, g.rejected) == (
            w.hit_tokens, w.prompt_tokens, w.evicted_blocks, w.rejected)
        assert g.hit_tokens == sum(w.per_request_hit_tokens[30:])
