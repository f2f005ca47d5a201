"""Hash chains recovered from events equal the requests' own block_hashes (the reference)."""

from __future__ import annotations

import pytest
from _viz_traces import PREFIX, make_request, seeded_hashes

from kvlab.core.kv_cache_utils import make_block_hash_with_group_id
from kvlab.trace import EventKind, KVState, Recorder, Trace
from kvlab.viz import build_hash_tree
from kvlab.viz.hash_tree import cached_blocks_of


def _indexes(trace: Trace, request_id: str, tokens: list[int]) -> list[int]:
    """The request's block_hashes (computed by core) as the trace's hash indexes."""
    with seeded_hashes():
        hashes = make_request(request_id, tokens).block_hashes
    return [trace.tables.find_hash(h) for h in hashes]


def test_chains_equal_each_requests_block_hashes(shared: Trace) -> None:
    tree = build_hash_tree(shared)
    assert tree.chains["a"] == _indexes(shared, "a", PREFIX[:10])
    assert tree.chains["b"] == _indexes(shared, "b", PREFIX[:8] + [900, 901, 902])
    assert tree.chains["c"] == _indexes(shared, "c", list(range(500, 530)))
    # d's second block was stored at event 61 (block 2); both of its blocks are known
    assert tree.chains["d"] == _indexes(shared, "d", PREFIX[:9])


def test_shared_prefix_is_one_path_that_forks(hybrid: Trace) -> None:
    tree = build_hash_tree(hybrid)
    a, b = tree.chains["a"], tree.chains["b"]
    assert b[:4] == a and len(b) == 6  # b = a's 16 tokens + 8 more (hashed up to token 24)
    kids = tree.children()
    assert kids[-1] == [a[0]] and kids[a[3]] == [b[4]]
    assert tree.parent[a[0]] == -1 and [tree.position[h] for h in b] == list(range(6))
    assert tree.requests_of(a[2]) == ["a", "b"] and tree.requests_of(b[5]) == ["b"]


def test_children_of_unknown_request_is_a_key_error(shared: Trace) -> None:
    with pytest.raises(KeyError, match="no hash chain for request"):
        build_hash_tree(shared).children(["zzz"])


def test_positions_skip_stores_with_null_blocks() -> None:
    # A store whose block count disagrees with its positions (null blocks skipped) is not used.
    h = [bytes([i]) * 32 for i in range(3)]
    rec = Recorder(initial_state=KVState.fresh(8), config={"groups": [], "hash_block_size": 4})
    rec.cache_full_blocks("r", 0, 0, 3, [5], [make_block_hash_with_group_id(h[2], 0)])
    rec.cache_full_blocks(
        "q", 0, 0, 2, [6, 7], [make_block_hash_with_group_id(x, 0) for x in h[:2]]
    )
    tree = build_hash_tree(rec.trace())
    assert "r" not in tree.chains and tree.chains["q"] == [1, 2]


def test_cached_blocks_of_reads_the_cached_map(shared: Trace) -> None:
    assert cached_blocks_of(shared.state_at(20), 1) == {0: (2,)}
    evicted = shared.find(EventKind.BLOCK_REMOVED)  # c's get_new_blocks evicts block 2
    assert shared[evicted]["block_id"] == 2
    assert cached_blocks_of(shared.state_at(evicted - 1), 1) == {0: (2,)}
    assert cached_blocks_of(shared.state_at(evicted), 1) == {}


def test_preorder_and_chain_ends(shared: Trace) -> None:
    tree = build_hash_tree(shared)
    c = tree.chains["c"]
    assert tree.preorder() == [0, 1, *c]
    assert tree.preorder(["c"]) == c
    assert tree.chain_ends() == {1: ["a", "b", "d"], c[-1]: ["c"]}
    assert tree.chain_ends(["d"]) == {1: ["d"]}


def test_every_nano_request_of_a_shared_prefix_gets_its_chain() -> None:
    from kvlab.nanovllm import NanoBlockManager, NanoSequence, compute_hash, record_nano

    m = NanoBlockManager(8, 2)
    rec = record_nano(m)
    prompts = {"a": [1, 2, 3, 4, 5], "b": [1, 2, 3, 4, 9, 9], "c": [1, 2, 7, 7]}
    for rid, tokens in prompts.items():
        m.allocate(NanoSequence(rid, tokens, 2))  # b and c hit a's blocks: they store less
    trace = rec.trace()

    def chain(tokens: list[int]) -> list[int]:
        hashes, h = [], -1
        for i in range(0, len(tokens) - len(tokens) % 2, 2):
            h = compute_hash(tokens[i : i + 2], h)
            hashes.append(trace.tables.find_hash(h.to_bytes(8, "big")))
        return hashes

    tree = build_hash_tree(trace)
    assert tree.chains == {r: chain(t) for r, t in prompts.items()}
    assert [len(c) for c in tree.chains.values()] == [2, 3, 2] and -1 not in tree.chains["b"]
    assert tree.children()[-1] == [tree.chains["a"][0]]
