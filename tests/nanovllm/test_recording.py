"""A recorded NanoBlockManager replays to its live state, and kvlab's views draw it."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlab.nanovllm import NanoBlockManager, NanoSequence, nano_state, record_nano
from kvlab.trace import EventKind, check_invariants, load_trace, save_trace
from kvlab.viz import render_block_table, render_free_queue, render_pool_grid, to_text


def _run(ops: list[tuple[int, int, int]], num_blocks: int = 6, bs: int = 2):
    """Apply ops (kind, request, token seed) to a recorded manager; snapshot after each call."""
    m = NanoBlockManager(num_blocks, bs)
    rec = record_nano(m)
    live: dict[str, NanoSequence] = {}
    snapshots = []
    for kind, r, t in ops:
        rid = f"r{r}"
        s = live.get(rid)
        if kind == 0 and s is None:  # admit: prompts share prefixes drawn from a tiny alphabet
            s = NanoSequence(rid, [1, 2, 3, 4, t % 3, t % 2, t][: 3 + t % 5], bs)
            if not m.can_allocate(s):
                continue
            m.allocate(s)
            live[rid] = s
        elif kind == 1 and s is not None:  # decode one token
            s.append_token(t % 4)
            if not m.can_append(s):
                s.token_ids.pop()
                continue
            m.may_append(s)
        elif kind == 2 and s is not None:  # finish
            m.deallocate(s)
            del live[rid]
        else:
            continue
        snapshots.append((len(rec) - 1, nano_state(m)))
    return m, rec, snapshots


OPS = st.lists(
    st.tuples(st.sampled_from([0, 0, 1, 1, 1, 1, 2]), st.integers(0, 3), st.integers(0, 20)),
    min_size=10,
    max_size=60,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_replay_equals_live_state_after_every_call(ops: list[tuple[int, int, int]]) -> None:
    m, rec, snapshots = _run(ops)
    trace = rec.trace()
    for index, live in snapshots:
        replayed = trace.state_at(index)
        assert replayed == live, replayed.diff(live)
        check_invariants(replayed, exact_ref_cnt=True)
    assert trace.check_replay() == nano_state(m)


def test_recorded_events_of_a_reactivation() -> None:
    m = NanoBlockManager(6, 2)
    rec = record_nano(m)
    a = NanoSequence("a", [1, 2, 3], 2)
    m.allocate(a)
    m.deallocate(a)
    c = NanoSequence("c", [1, 2, 5], 2)
    m.allocate(c)
    t = rec.trace()
    kinds = [e.kind for e in t]
    start = max(i for i, e in enumerate(t) if e.kind is EventKind.CALL_BEGIN)
    assert [k.name for k in kinds[start:]] == [
        "CALL_BEGIN",
        "LOOKED_UP",  # hit on block 0, which is free: taken back out of the middle
        "REMOVE",
        "TOUCH",
        "REQ_BLOCKS_ADDED",
        "POPLEFT",  # the partial block takes the head (2); block 1 stays where it is
        "GET_NEW_BLOCKS",
        "REQ_BLOCKS_ADDED",
        "CALL_END",
    ]
    assert t[start].fields["name"] == "allocate" and t[-1].fields["result"] == [2]
    assert c.block_table == [0, 2] and t.state_at(len(t) - 1).free_queue_order() == [3, 4, 5, 1]


def test_eviction_is_recorded_when_a_cached_block_is_reused(tmp_path) -> None:
    m = NanoBlockManager(3, 2)
    rec = record_nano(m)
    a = NanoSequence("a", [1, 2, 3, 4], 2)
    m.allocate(a)
    m.deallocate(a)  # free: [2, 1, 0]; blocks 0, 1 cached
    b = NanoSequence("b", [7, 7, 7, 7, 7], 2)
    m.allocate(b)  # takes 2, then 1 (evicts h1), then 0 (evicts h0)
    t = rec.trace()
    removed = [e.fields["block_id"] for e in t if e.kind is EventKind.BLOCK_REMOVED]
    assert removed == [1, 0] and m.stats.num_evicted_blocks == 2
    path = tmp_path / "nano.kvtrace"
    save_trace(t, path)
    loaded = load_trace(path)
    assert loaded.state_at(len(loaded) - 1) == nano_state(m)
    assert loaded.config["cache"] == "nano-vllm"


def test_views_draw_a_nano_trace() -> None:
    m = NanoBlockManager(6, 2)
    rec = record_nano(m)
    a = NanoSequence("a", [1, 2, 3, 4, 5], 2)
    b = NanoSequence("b", [1, 2, 3, 4, 9], 2)
    m.allocate(a)
    m.allocate(b)
    m.deallocate(a)
    t = rec.trace()
    last = len(t) - 1
    grid = to_text(render_pool_grid(t, last))
    assert "6 blocks: 3 in_use, 3 free" in grid
    queue = to_text(render_free_queue(t, last))
    assert " ".join(queue.split()) == (
        "free_block_ids · nano-vllm deque · 3 blocks · popleft / append; a hit on a free block "
        "is removed by an O(n) scan evicts first ◀ HEAD ⇄ 4 ⇄ 5 ⇄ 2 ⇄ TAIL ◀ deallocate appends "
        "here (last block first)"
    )
    table = to_text(render_block_table(t, last))
    assert "b" in table and "3" in table


def test_the_player_encodes_and_exports_a_nano_trace(tmp_path) -> None:
    from kvlab.viz import encode_trace, export_html

    m = NanoBlockManager(4, 2)
    rec = record_nano(m)
    m.allocate(NanoSequence("a", [1, 2, 3], 2))
    t = rec.trace()
    data = encode_trace(t)
    assert data["config"]["cache"] == "nano-vllm" and data["initial"]["null_block_id"] == -1
    assert data["num_events"] == len(t) and "allocate" in data["call_names"]
    path = tmp_path / "nano.html"
    export_html(t, path)
    assert "nano-vllm" in path.read_text()
