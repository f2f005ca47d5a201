"""Predict mode (kvlab.viz.predict): questions derived from real traces, checked against replay.

The right answer of every quiz point is recomputed here independently of ``quiz_points``:
popleft from ``trace.state_at(ask)``'s free-queue order, evict from the block hashes of that
state, hit from the request's hash chain (``build_hash_tree``) looked up in the cached map.
The JavaScript side (``static/predict.js``: where a step stops, scoring, reset) runs under Node
against the same points (``tests/viz/js/predict.test.mjs``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from _viz_traces import admit, make_manager, make_request, seeded_hashes, serving_trace

from kvlab.trace import EventKind, Recorder, Trace
from kvlab.trace.tables import key_code
from kvlab.viz import PREDICT_KINDS, build_hash_tree, encode_trace, export_html, quiz_points
from kvlab.viz.calls import block_size_of

K = EventKind
NODE = shutil.which("node")
TEST_FILE = Path(__file__).parent / "js" / "predict.test.mjs"


@pytest.fixture(scope="module")
def serving() -> Trace:
    return serving_trace(64, 3000, seed=1)


def _truth(p: Any) -> Any:
    return p.values[p.answer]


def _expected_hit(trace: Trace, ask: int, reveal: int) -> int | None:
    """Hit length from the request's hash chain and the cached map at ``ask`` (one group)."""
    call = trace.call(reveal)
    state, chain = trace.state_at(ask), build_hash_tree(trace).chains.get(call.request, [])
    bs = block_size_of(trace)
    limit = min((call.args["num_tokens"] - 1) // bs, call.args["num_block_hashes"])
    hits = 0
    while hits < min(limit, len(chain)) and key_code(chain[hits], 0) in state.cached:
        hits += 1
    if hits == len(chain) < limit:
        return None  # the chain is not known far enough to tell
    return hits * bs


CLASSIC = ("evict", "hit", "popleft")
"""The free-queue and lookup kinds (test_predict_decisions.py checks the others)."""


def _check_points(trace: Trace) -> dict[str, int]:
    points = quiz_points(trace, CLASSIC)
    counts = dict.fromkeys(CLASSIC, 0)
    for p in points:
        counts[p.kind] += 1
        assert 2 <= len(p.choices) <= 4 and len(set(p.choices)) == len(p.choices), p
        assert len(p.values) == len(p.choices) and p.ask < p.reveal, p
        state = trace.state_at(p.ask)
        if p.kind == "popleft":
            taken = trace[p.reveal]["block_ids"]
            assert p.ask == p.reveal - 1 and trace[p.reveal].kind == K.POPLEFT_N
            assert _truth(p) == taken == state.free_queue_order()[: len(taken)], p
        elif p.kind == "evict":
            # asked at get_new_blocks' POPLEFT_N; only the counts of the popped blocks without
            # a hash (one merged GET_NEW_BLOCKS) come between it and the first eviction
            assert trace[p.ask].kind == K.POPLEFT_N, p
            between = [trace[j].kind for j in range(p.ask + 1, p.reveal)]
            assert between in ([], [K.GET_NEW_BLOCKS]), p
            popped = trace[p.ask]["block_ids"]
            first_cached = next(b for b in popped if state.block_hash[b] >= 0)
            assert _truth(p) == trace[p.reveal]["block_id"] == first_cached, p
            assert f"block {first_cached} " in p.explanation
        else:
            call = trace.call(p.reveal)
            assert (call.name, call.end, call.begin - 1) == ("get_computed_blocks", p.reveal, p.ask)
            assert _truth(p) == call.result["num_new_computed_tokens"], p
            assert f"{_truth(p)} tokens" in p.explanation, p
            if trace.config["num_groups"] == 1:
                assert _expected_hit(trace, p.ask, p.reveal) in (None, _truth(p)), p
    # NOTE: the player relies on this: windows [ask, reveal] never overlap, in order.
    assert all(a.reveal <= b.ask for a, b in pairwise(points))
    return counts


def test_shared_prefix_points_are_the_replayed_truths(shared: Trace) -> None:
    assert _check_points(shared) == {"evict": 2, "hit": 4, "popleft": 4}
    points = quiz_points(shared, CLASSIC)
    got = [(p.kind, p.ask, p.reveal, _truth(p)) for p in points]
    # evict: asked at the POPLEFT_N; c's get_new_blocks counts 5 ... 4 (GET_NEW_BLOCKS, 41)
    # before it evicts block 2 (42); d's counts block 2 (63) before it evicts block 4 (64)
    assert got == [
        ("hit", 0, 3, 0), ("popleft", 5, 6, [1, 2, 3]), ("hit", 10, 14, 8),
        ("popleft", 18, 19, [4]), ("hit", 34, 37, 0), ("popleft", 39, 40, [5, 6, 7, 8, 9, 3, 4, 2]),
        ("evict", 40, 42, 2), ("hit", 52, 56, 4), ("popleft", 61, 62, [2, 4]), ("evict", 62, 64, 4),
    ]  # fmt: skip
    by_reveal = {p.reveal: p for p in points}
    # LRU distractors: the tail end (most recently freed) is offered, and is wrong.
    assert [9, 8, 7] in by_reveal[6].values and by_reveal[6].choices[
        by_reveal[6].answer
    ] == "blocks 1, 2, 3"
    assert "blocks 5, 6, 7, 8, 9, 3, 4" in by_reveal[42].explanation  # popped before, no hash
    assert "block 1" in by_reveal[42].choices  # still cached in the free queue: not evicted
    assert "the partial block" in by_reveal[14].explanation
    assert "block 1's block_hash is not in cached_block_hash_to_block" in by_reveal[56].explanation


def test_hybrid_and_serving_points_are_the_replayed_truths(hybrid: Trace, serving: Trace) -> None:
    counts = _check_points(hybrid)
    assert counts == {"evict": 0, "hit": 2, "popleft": 8}  # its one eviction is evict_blocks'
    b_lookup = hybrid.calls("get_computed_blocks", request="b")[0]
    (second,) = [p for p in quiz_points(hybrid, ["hit"]) if p.reveal == b_lookup.end]
    assert _truth(second) == 12 and "16 -> 12" in second.explanation  # sliding window cut it
    counts = _check_points(serving)
    assert min(counts.values()) >= 20, counts


def test_the_cap_and_disabled_caching_are_explained() -> None:
    with seeded_hashes():
        m = make_manager(12)
        rec = Recorder().attach(m)
        assert admit(m, make_request("a", list(range(8))))  # 2 full blocks, cached
        assert admit(m, make_request("b", list(range(8))))  # same 8 tokens: the cap binds
        rec.detach()
        off = make_manager(12, enable_caching=False)
        rec_off = Recorder().attach(off)
        assert admit(off, make_request("c", list(range(8))))
        rec_off.detach()
    trace = rec.trace()
    (_, capped) = quiz_points(trace, ["hit"])
    assert _truth(capped) == 4 and _expected_hit(trace, capped.ask, capped.reveal) == 4
    assert "the cap binds: at most num_tokens - 1 = 7 tokens may hit" in capped.explanation
    assert 8 in capped.values and 7 in capped.values  # "all of it" and "the cap" are offered
    (skipped,) = quiz_points(rec_off.trace(), ["hit"])
    assert _truth(skipped) == 0 and "enable_caching=False" in skipped.explanation


def test_bad_kinds_are_refused_with_the_allowed_ones(shared: Trace, tmp_path: Path) -> None:
    for bad, error in ((["lru"], ValueError), ("popleft", TypeError), (["hit", "hit"], ValueError)):
        with pytest.raises(error, match=r"\('evict', 'fixed_point', 'hit', 'popleft', 'preempt', 'window'\)"):
            quiz_points(shared, bad)
        with pytest.raises(error, match="evict"):
            export_html(shared, tmp_path / "bad.html", predict=bad)
    assert not (tmp_path / "bad.html").exists()
    assert quiz_points(shared, []) == []


def test_export_inlines_the_questions(shared: Trace, tmp_path: Path) -> None:
    page = export_html(shared, tmp_path / "p.html", predict=("popleft", "evict")).read_text()
    (state,) = re.findall(r'data-kvlab-player="kvlab-player">(.*?)</script>', page, re.DOTALL)
    state = json.loads(state)
    assert state["predict"] == ["popleft", "evict"]
    assert state["quiz"] == [p.to_dict() for p in quiz_points(shared, ["popleft", "evict"])]
    assert [q["reveal"] for q in state["quiz"]] == [6, 19, 40, 42, 62, 64]
    plain = export_html(shared, tmp_path / "q.html").read_text()
    assert '"quiz":[]' in plain and '"predict":[]' in plain


def test_player_syncs_the_questions(shared: Trace) -> None:
    pytest.importorskip("anywidget")
    import traitlets

    from kvlab.viz import TracePlayer

    player = TracePlayer(shared, predict=("hit",))
    assert player.predict == ["hit"] and player.trait_metadata("quiz", "sync") is True
    assert player.get_state()["quiz"] == [p.to_dict() for p in quiz_points(shared, ["hit"])]
    player.predict = ["evict"]
    assert [q["reveal"] for q in player.quiz] == [42, 64]
    with pytest.raises(traitlets.TraitError, match=r"\('evict', 'fixed_point', 'hit', 'popleft', 'preempt',"):
        player.predict = ["next_block"]
    assert player.predict == ["evict"] and len(player.quiz) == 2  # unchanged
    with pytest.raises(traitlets.TraitError, match="popleft"):
        TracePlayer(shared, predict="popleft")
    assert TracePlayer(shared).quiz == []


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_js_quiz_stops_scores_and_truths(
    shared: Trace, hybrid: Trace, serving: Trace, tmp_path: Path
) -> None:
    from test_predict_decisions import preempting_trace

    cases = [
        {"name": name, "trace": encode_trace(t), "quiz": [p.to_dict() for p in quiz_points(t)]}
        for name, t in (("shared_prefix", shared), ("hybrid", hybrid), ("serving", serving),
                        ("preempting", preempting_trace()))
    ]
    assert {q["kind"] for c in cases for q in c["quiz"]} == set(PREDICT_KINDS)
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps({"cases": cases}))
    proc = subprocess.run(
        [NODE, "--test", str(TEST_FILE)],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "KVLAB_PREDICT_FIXTURE": str(fixture)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "# fail 0" in proc.stdout and "# pass 21" in proc.stdout, proc.stdout[-2000:]
