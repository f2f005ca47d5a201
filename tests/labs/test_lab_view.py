"""The divergence view without a browser: vLLM's trace stops at the divergence, the learner's
state is what their code left, the HTML report names the fields, the widget holds two players."""
from __future__ import annotations

import pytest

import buggy_block_pool
import buggy_free_queue
from kvlab.labs import check
from kvlab.labs.view import divergence_traces, divergence_view, result_html


def test_a_queue_divergence_shows_vllms_queue_and_the_learners() -> None:
    result = check("free_queue", buggy_free_queue.AppendAtHead, seed=7)
    trace, index, mine = divergence_traces(result)
    div = result.divergence
    assert index == len(trace) - 1 and trace[index].kind.name == "APPEND_N"
    assert trace.state_at(index).free_queue_order() == div.want == [0, 1, 2, 4, 3]
    assert len(mine) == 0 and mine.state_at(-1).free_queue_order() == div.got == [2, 4, 3, 0, 1]


def test_a_pool_divergence_carries_ref_cnt_hashes_and_requests() -> None:
    result = check("block_pool", buggy_block_pool.EagerEviction, seed=0)
    trace, index, mine = divergence_traces(result)
    div = result.divergence
    want, got = trace.state_at(index), mine.state_at(-1)
    assert want.free_queue_order() == got.free_queue_order() == div.want_state["free queue"]
    assert [None if b is None else b for b in (want.block_hash_bytes(i) for i in range(want.num_blocks))] == div.want
    assert [got.block_hash_bytes(i) for i in range(got.num_blocks)] == div.got
    assert got.ref_cnt[1:] == div.got_state["ref_cnt"][1:]
    assert trace.config["num_groups"] == 1 and mine.config == trace.config


def test_the_html_report_lists_each_field_and_the_hint() -> None:
    result = check("free_queue", buggy_free_queue.AppendAtHead, seed=7)
    html = result_html(result)
    assert "operation 14: append_n([2, 4, 3])" in html and "<th>free queue</th>" in html
    assert "<code>[2, 4, 3, 0, 1]</code>" in html and "LRU order: a freed block joins the tail" in html
    zh = result_html(check("free_queue", buggy_free_queue.AppendAtHead, seed=7, lang="zh"))
    assert "<th>空闲队列</th>" in zh and "第 14 个操作" in zh


def test_the_widget_puts_two_players_side_by_side() -> None:
    pytest.importorskip("anywidget")
    from kvlab.viz import TracePlayer

    result = check("free_queue", buggy_free_queue.AppendAtHead, seed=7)
    view = divergence_view(result)
    report, row = view.children
    left, right = row.children
    assert isinstance(left.children[1], TracePlayer) and isinstance(right.children[1], TracePlayer)
    assert left.children[1].index == left.children[1].num_events - 1
    assert "kvlab-divergence-view" in view._dom_classes


def test_nothing_to_draw_without_a_state_divergence() -> None:
    from kvlab.labs.solutions import reference

    assert divergence_view(check("free_queue", reference("free_queue"), seed=1)) is None
    import buggy_block_hash

    assert divergence_traces(check("block_hash", buggy_block_hash.BUGS["no_chain"], seed=0)) is None
