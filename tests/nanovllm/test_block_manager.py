"""NanoBlockManager: nano-vllm's BlockManager semantics, hand-checked block by block."""

from __future__ import annotations

import numpy as np
import pytest
import xxhash

from kvlab.nanovllm import (
    NO_HASH,
    NanoBlockManager,
    NanoSequence,
    compute_hash,
    hash_key,
)


def seq(rid: str, tokens: list[int], bs: int = 2) -> NanoSequence:
    return NanoSequence(rid, tokens, block_size=bs)


def snapshot(m: NanoBlockManager) -> tuple:
    return (
        list(m.free_block_ids),
        sorted(m.used_block_ids),
        [(b.ref_count, b.hash, list(b.token_ids)) for b in m.blocks],
        dict(m.hash_to_block_id),
        m.stats.as_dict(),
        {r: list(s.block_table) for r, s in m.seqs.items()},
    )


# ---------------------------------------------------------------------------- hashing
def test_compute_hash_is_chained_xxh64_of_int64_tokens() -> None:
    h0 = compute_hash([1, 2])
    assert h0 == xxhash.xxh64(np.array([1, 2], dtype=np.int64).tobytes()).intdigest()
    h1 = compute_hash([3, 4], h0)
    expected = xxhash.xxh64(h0.to_bytes(8, "little") + np.array([3, 4], np.int64).tobytes())
    assert h1 == expected.intdigest()
    assert compute_hash([3, 4]) != h1  # same tokens, other prefix: another hash
    assert hash_key(h1) == h1.to_bytes(8, "big") + b"\x00\x00\x00\x00"


# ---------------------------------------------------------------------------- allocate
def test_shared_prefix_shares_blocks_and_counts_cached_tokens() -> None:
    m = NanoBlockManager(num_blocks=6, block_size=2)
    a, b = seq("a", [1, 2, 3, 4, 5]), seq("b", [1, 2, 3, 4, 9])
    m.allocate(a)
    assert a.block_table == [0, 1, 2] and a.num_cached_tokens == 0
    assert [blk.hash for blk in m.blocks[:3]] == [
        compute_hash([1, 2]),
        compute_hash([3, 4], compute_hash([1, 2])),
        NO_HASH,  # the partial block is not hashed
    ]
    m.allocate(b)
    assert b.block_table == [0, 1, 3] and b.num_cached_tokens == 4
    assert [blk.ref_count for blk in m.blocks] == [2, 2, 1, 1, 0, 0]
    assert list(m.free_block_ids) == [4, 5] and m.used_block_ids == {0, 1, 2, 3}
    assert m.stats.num_hits == 2 and m.stats.num_lookups == 3  # a: 1 probe (miss), b: 2 hits


def test_can_allocate_ignores_hits() -> None:
    m = NanoBlockManager(num_blocks=4, block_size=2)
    m.allocate(seq("a", [1, 2, 3, 4, 5]))
    b = seq("b", [1, 2, 3, 4, 9])  # 2 of its 3 blocks would hit; 1 block is free
    assert not m.can_allocate(b)
    before = snapshot(m)
    with pytest.raises(ValueError, match="needs 3 free blocks, 1 free"):
        m.allocate(b)
    assert snapshot(m) == before and b.block_table == []


def test_deallocate_appends_in_reverse_and_keeps_hashes() -> None:
    m = NanoBlockManager(num_blocks=6, block_size=2)
    a = seq("a", [1, 2, 3, 4, 5])
    m.allocate(a)
    h0 = m.blocks[0].hash
    m.deallocate(a)
    assert list(m.free_block_ids) == [3, 4, 5, 2, 1, 0]
    assert a.block_table == [] and a.num_cached_tokens == 0 and not m.used_block_ids
    assert m.blocks[0].hash == h0 and m.blocks[0].token_ids == [1, 2]
    assert m.cached_hashes() == {h0: 0, m.blocks[1].hash: 1}


def test_reactivation_removes_from_the_middle_of_the_deque() -> None:
    m = NanoBlockManager(num_blocks=6, block_size=2)
    a = seq("a", [1, 2, 3, 4, 5])
    m.allocate(a)
    m.deallocate(a)  # free: [3, 4, 5, 2, 1, 0]
    c = seq("c", [1, 2, 3, 4, 7, 8, 6])
    m.allocate(c)
    # blocks 0 and 1 are hits taken back out of the deque (positions 5 and 4); [7, 8] misses
    # and takes the head (3); the partial [6] takes the next head (4).
    assert c.block_table == [0, 1, 3, 4] and c.num_cached_tokens == 4
    assert list(m.free_block_ids) == [5, 2]
    assert m.stats.num_reactivated_blocks == 2 and m.stats.num_deque_scan_steps == 9
    assert [b.ref_count for b in m.blocks] == [1, 1, 0, 1, 1, 0]


def test_full_hit_counts_every_block() -> None:
    m = NanoBlockManager(num_blocks=4, block_size=2)
    a = seq("a", [1, 2, 3, 4])
    m.allocate(a)
    b = seq("b", [1, 2, 3, 4])
    m.allocate(b)
    assert b.block_table == [0, 1] and b.num_cached_tokens == 4  # nano-vllm: the whole prompt


def test_overwritten_entry_stale_entry_and_miss_after_first_miss() -> None:
    """A decode reproduces a cached block (the map entry moves), a reuse leaves a stale entry
    whose tokens no longer match, and every block after that miss is allocated fresh."""
    m = NanoBlockManager(num_blocks=11, block_size=2)
    a = seq("a", [1, 2, 3, 4])
    m.allocate(a)  # blocks 0 (h0), 1 (h1)
    h0, h1 = m.blocks[0].hash, m.blocks[1].hash
    b = seq("b", [1])
    m.allocate(b)  # partial: block 2
    b.append_token(2)
    m.may_append(b)  # fills block 2 with [1, 2]: hash h0, the entry now points at 2
    assert m.hash_to_block_id[h0] == 2 and m.blocks[0].hash == h0
    assert not m.is_cached(0) and m.is_cached(2) and m.stats.num_evicted_blocks == 1
    m.deallocate(b)  # free: [3..10, 2]
    filler = seq("f", list(range(100, 118)))  # 9 blocks: takes 3..10 and then 2
    m.allocate(filler)
    assert filler.block_table == [3, 4, 5, 6, 7, 8, 9, 10, 2]
    assert m.stale_entries() == {h0: 2} and m.stats.num_evicted_blocks == 2
    m.deallocate(filler)
    c = seq("c", [1, 2, 3, 4, 5])
    m.allocate(c)
    # h0 -> block 2, whose tokens are the filler's: a miss (the token check). Block 1 holds h1
    # and is cached, but after the first miss nano-vllm allocates fresh: the entry moves again.
    assert m.stats.num_token_mismatches == 1 and c.num_cached_tokens == 0
    assert c.block_table == [2, 10, 9]
    assert m.hash_to_block_id[h1] == 10 and not m.is_cached(1) and m.blocks[1].hash == h1


def test_allocate_rejects_bad_input_without_changes() -> None:
    m = NanoBlockManager(num_blocks=4, block_size=2)
    a = seq("a", [1, 2, 3])
    m.allocate(a)
    before = snapshot(m)
    with pytest.raises(ValueError, match="already holds blocks"):
        m.allocate(a)
    with pytest.raises(ValueError, match="already holds blocks"):
        m.allocate(seq("a", [5]))
    with pytest.raises(ValueError, match="block_size 4"):
        m.allocate(seq("x", [1], bs=4))
    with pytest.raises(TypeError, match="NanoSequence"):
        m.allocate([1, 2])  # type: ignore[arg-type]
    assert snapshot(m) == before


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_blocks": 0, "block_size": 2}, "num_blocks"),
        ({"num_blocks": 4, "block_size": 1}, "block_size must be an int >= 2"),
        ({"num_blocks": 4, "block_size": 2.0}, "block_size"),
    ],
)
def test_manager_rejects_bad_sizes(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        NanoBlockManager(**kwargs)


def test_sequence_checks_and_blocks() -> None:
    s = seq("s", [1, 2, 3, 4, 5], bs=2)
    assert (s.num_blocks, s.block(2), s.last_block_num_tokens) == (3, [5], 1)
    with pytest.raises(IndexError):
        s.block(3)
    with pytest.raises(ValueError, match="at least one token"):
        seq("e", [])
    with pytest.raises(TypeError, match="ints"):
        seq("e", [1, "2"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        s.append_token(1.5)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- decode
def test_may_append_three_cases() -> None:
    m = NanoBlockManager(num_blocks=4, block_size=2)
    s = seq("s", [1, 2, 3])
    m.allocate(s)  # blocks 0 (full), 1 (partial [3])
    s.append_token(4)  # len 4: fills block 1 -> hash it, chained to block 0
    assert m.can_append(s)
    m.may_append(s)
    assert m.blocks[1].hash == compute_hash([3, 4], m.blocks[0].hash)
    assert m.hash_to_block_id[m.blocks[1].hash] == 1 and s.block_table == [0, 1]
    s.append_token(5)  # len 5: starts a block -> take the head of the deque
    m.may_append(s)
    assert s.block_table == [0, 1, 2] and list(m.free_block_ids) == [3]
    s.append_token(6)  # len 6: fills block 2
    m.may_append(s)
    s.append_token(7)  # len 7 -> block 3
    m.may_append(s)
    s.append_token(8)
    m.may_append(s)
    s.append_token(9)  # len 9 needs a block; none free
    assert not m.can_append(s)
    before = snapshot(m)
    with pytest.raises(ValueError, match="needs a block, none free"):
        m.may_append(s)
    assert snapshot(m) == before


def test_may_append_third_case_changes_nothing_and_misuse_is_rejected() -> None:
    m = NanoBlockManager(num_blocks=4, block_size=4)
    s = NanoSequence("s", [1, 2, 3, 4, 5], block_size=4)
    m.allocate(s)
    s.append_token(6)  # len 6: room in the last block
    before = snapshot(m)
    m.may_append(s)
    assert snapshot(m) == before
    s.append_token(7)
    s.append_token(8)
    s.append_token(9)  # len 9 starts a block, but the full block 1 was never hashed (len 8)
    with pytest.raises(ValueError, match="last block 1 has no hash"):
        m.may_append(s)
    s.append_token(10)  # len 10: the table should have 3 blocks, it has 2
    with pytest.raises(ValueError, match="once per appended token"):
        m.may_append(s)
    assert snapshot(m) == before
    with pytest.raises(ValueError, match="holds no blocks"):
        m.may_append(NanoSequence("z", [1], block_size=4))
    with pytest.raises(ValueError, match="holds no blocks"):
        m.deallocate(NanoSequence("z", [1], block_size=4))
