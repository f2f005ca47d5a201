"""The terminal views name the cache design and show where nano-vllm differs from vLLM V1."""

from __future__ import annotations

import pytest

from kvlab.core.kv_events import BlockStored, KVEventBatch
from kvlab.kv_events.stream import KVEventTraceBuilder
from kvlab.nanovllm import NanoBlockManager, NanoSequence, record_nano
from kvlab.trace import Trace
from kvlab.viz import render_events, render_free_queue, render_state, to_text
from kvlab.viz.design_header import cache_design, event_notes, last_deque_scan, render_cache_header


def _flat(text: str) -> str:
    return " ".join(text.split())


def _reactivation_trace() -> Trace:
    """a frees blocks 2 1 0 (free_block_ids 3 4 5 2 1 0); b hits 0 and 1: two O(n) removes."""
    m = NanoBlockManager(6, 2)
    rec = record_nano(m)
    a = NanoSequence("a", [1, 2, 3, 4, 5], 2)
    m.allocate(a)
    m.deallocate(a)
    m.allocate(NanoSequence("b", [1, 2, 3, 4, 9], 2))
    return rec.trace()


def _mismatch_trace() -> Trace:
    """b reuses a's freed blocks (block 0 becomes b's partial block); c's probe of a's first
    hash finds the stale entry -> block 0, whose tokens differ."""
    m = NanoBlockManager(3, 2)
    rec = record_nano(m)
    for rid, tokens in (("a", [1, 2, 3, 4]), ("b", [7, 7, 7, 7, 7])):
        s = NanoSequence(rid, tokens, 2)
        m.allocate(s)
        m.deallocate(s)
    m.allocate(NanoSequence("c", [1, 2, 3, 4], 2))
    return rec.trace()


def test_free_queue_of_a_nano_trace_shows_the_scan() -> None:
    t = _reactivation_trace()
    assert [t[i].kind.name for i in (25, 29)] == ["REMOVE", "REMOVE"]
    assert _flat(to_text(render_free_queue(t, 29))) == (
        "free_block_ids · nano-vllm deque · 4 blocks · popleft / append; a hit on a free block "
        "is removed by an O(n) scan evicts first ◀ HEAD ⇄ 3 ⇄ 4 ⇄ 5 ⇄ 2 ⇄ TAIL ◀ deallocate "
        "appends here (last block first) remove(block 1) at event #29: scanned 4 position(s) "
        "of the deque to find it (vLLM V1's FreeKVCacheBlockQueue unlinks in O(1))"
    )
    assert last_deque_scan(t, 26) == (25, 0, 5)
    assert last_deque_scan(t, 24) is None  # no remove yet in b's allocate
    assert last_deque_scan(t, 20) is None  # inside a's deallocate


def test_header_names_the_design_and_counts_nano_differences() -> None:
    t = _mismatch_trace()
    last = len(t) - 1
    assert to_text(render_cache_header(t, last), width=200).splitlines() == [
        "cache design: nano-vllm BlockManager (hash_to_block_id + deque free_block_ids)",
        (
            "nano-vllm so far: lookups 3, hits 0, token-id mismatch misses 1, stale-entry hits 0, "
            "re-activated blocks 0 (0 deque positions scanned), stale map entries 1"
        ),
    ]
    # before c: a's two entries are stale (b reset both blocks); c re-stores one, staling b's
    assert (
        to_text(render_cache_header(t, 43), width=200)
        .splitlines()[1]
        .endswith(
            "token-id mismatch misses 0, stale-entry hits 0, re-activated blocks 0 "
            "(0 deque positions scanned), stale map entries 2"
        )
    )
    state = to_text(render_state(t, last), width=200).splitlines()
    assert (
        state[1] == "cache design: nano-vllm BlockManager (hash_to_block_id + deque free_block_ids)"
    )


def test_event_list_marks_reactivation_and_mismatch() -> None:
    t = _reactivation_trace()
    lines = to_text(render_events(t, 29, before=4, after=0), width=200).splitlines()
    assert lines[1] == (
        "  #25 step 0   REMOVE block_id=0  ⟵ re-activates freed cached block 0 "
        "(O(n) deque scan: 5 positions)"
    )
    m = _mismatch_trace()
    assert event_notes(m, 0, len(m) - 1) == {44: "token-id mismatch: stale entry names block 0"}
    assert event_notes(m, 45, len(m) - 1) == {}


@pytest.mark.parametrize(
    ("config", "design"),
    [
        ({}, "vLLM V1 (BlockPool + FreeKVCacheBlockQueue, kvlab.core)"),
        ({"cache": "nano-vllm"}, "nano-vllm BlockManager (hash_to_block_id + deque free_block_ids)"),
        ({"cache": "vllm-kv-events"},
         "vLLM KV events (BlockStored / BlockRemoved stream; slots are kvlab's)"),
        ({"cache": "radix"}, "radix"),
    ],
)  # fmt: skip
def test_cache_design(config, design) -> None:
    assert cache_design(config) == design


def test_kv_event_trace_is_labelled_as_slots() -> None:
    b = KVEventTraceBuilder(num_blocks=3)
    b.add_batch(KVEventBatch(0.0, [BlockStored([7, 8], None, [], 16, None, "GPU", None)]))
    t = b.trace()
    assert _flat(to_text(render_free_queue(t, len(t) - 1))).startswith(
        "slots rebuilt from vLLM KV events · 3 slots · slot order, not vLLM's eviction order"
    )
    assert to_text(render_cache_header(t, len(t) - 1)).strip() == (
        "cache design: vLLM KV events (BlockStored / BlockRemoved stream; slots are kvlab's)"
    )
    with pytest.raises(IndexError):
        render_cache_header(t, len(t))
