"""Workloads from JSONL files and from saved kvlab traces."""

from __future__ import annotations

import json

import pytest

from kvlab.compare.driver import run_workload
from kvlab.compare.workload_io import from_jsonl, from_jsonl_lines, from_trace, to_jsonl
from kvlab.compare.workloads import multi_turn_chat, shared_system_prompt
from kvlab.trace import save_trace


def test_jsonl_round_trip(tmp_path) -> None:
    w = multi_turn_chat(num_conversations=2, num_turns=2, system_len=6, user_len=3, max_tokens=2)
    path = tmp_path / "w.jsonl"
    to_jsonl(w, path)
    back = from_jsonl(path)
    assert back.requests == w.requests
    first = json.loads(path.read_text().splitlines()[0])
    assert first["prompt_token_ids"] == list(w.requests[0].prompt_token_ids)


def test_jsonl_defaults_text_prompts_and_errors() -> None:
    w = from_jsonl_lines([
        '{"prompt_token_ids": [5, 6], "max_tokens": 2, "arrival_step": 1}',
        "",
        '{"request_id": "t", "prompt": "a b c", "max_tokens": 1}',
    ], tokenize=lambda s: [ord(c) for c in s.split()[0]] * 3)  # fmt: skip
    assert [r.request_id for r in w.requests] == ["req-0", "t"]
    assert w.requests[1].prompt_token_ids == (97, 97, 97) and w.requests[1].arrival_step == 0
    with pytest.raises(ValueError, match="line 1: has a text 'prompt' but no tokenize"):
        from_jsonl_lines(['{"prompt": "x", "max_tokens": 1}'])
    with pytest.raises(ValueError, match="line 2: not JSON"):
        from_jsonl_lines(['{"prompt_token_ids": [1], "max_tokens": 1}', "{oops"])
    with pytest.raises(ValueError, match="line 1: needs 'max_tokens'"):
        from_jsonl_lines(['{"prompt_token_ids": [1]}'])
    with pytest.raises(ValueError, match="line 1: needs 'prompt_token_ids'"):
        from_jsonl_lines(['{"max_tokens": 1}'])


def test_from_trace_rebuilds_the_sharing_of_a_recorded_run(tmp_path) -> None:
    w = shared_system_prompt(num_requests=4, system_len=20, user_len=6, max_tokens=5, seed=4)
    original = run_workload(w, "vllm", pool_tokens=512, block_size=4, record=True)
    path = tmp_path / "run.kvtrace"
    save_trace(original.trace, path)
    rebuilt = from_trace(path)
    assert [r.request_id for r in rebuilt.requests] == [r.request_id for r in w.requests]
    for r, o in zip(rebuilt.requests, w.requests, strict=True):
        assert len(r.prompt_token_ids) == len(o.prompt_token_ids)
        assert r.max_tokens == o.max_tokens and r.arrival_step == o.arrival_step
    # the 5 system-prompt blocks are the same tokens in every rebuilt request, the rest differ
    p = [r.prompt_token_ids for r in rebuilt.requests]
    assert all(q[:20] == p[0][:20] for q in p) and p[0][20:24] != p[1][20:24]
    again = run_workload(rebuilt, "vllm", pool_tokens=512, block_size=4)
    assert (
        [r.first_hit_tokens for r in again.requests.values()]
        == [r.first_hit_tokens for r in original.requests.values()]
        == [0, 20, 20, 20]
    )


def test_from_trace_needs_requests() -> None:
    from kvlab.trace import KVState, Recorder

    empty = Recorder(initial_state=KVState.fresh(4), config={"hash_block_size": 4}).trace()
    with pytest.raises(ValueError, match="no get_computed_blocks call"):
        from_trace(empty)
