"""Workload generators: the sharing structure each one promises, exactly."""

from __future__ import annotations

import pytest

from kvlab.compare.workloads import (
    WorkloadRequest,
    few_shot,
    multi_turn_chat,
    rag,
    shared_system_prompt,
)


def common_prefix(a, b) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_shared_system_prompt_shares_exactly_the_system_prompt() -> None:
    w = shared_system_prompt(num_requests=5, system_len=40, user_len=7, max_tokens=3, seed=1)
    prompts = [r.prompt_token_ids for r in w.requests]
    assert [len(p) for p in prompts] == [47] * 5
    assert [r.arrival_step for r in w.requests] == [0, 1, 2, 3, 4]
    assert {common_prefix(prompts[0], p) for p in prompts[1:]} == {40}
    assert all(len(r.output_token_ids) == 3 for r in w.requests)
    again = shared_system_prompt(num_requests=5, system_len=40, user_len=7, max_tokens=3, seed=1)
    assert again.requests == w.requests  # deterministic
    assert shared_system_prompt(2, 40, 7, 3, seed=2).requests[0] != w.requests[0]


def test_multi_turn_chat_prompts_contain_the_previous_turn_and_its_answer() -> None:
    w = multi_turn_chat(num_conversations=2, num_turns=3, system_len=8, user_len=5, max_tokens=4)
    by_id = {r.request_id: r for r in w.requests}
    for c in range(2):
        for t in range(1, 3):
            prev, cur = by_id[f"chat{c}-t{t - 1}"], by_id[f"chat{c}-t{t}"]
            history = prev.prompt_token_ids + prev.output_token_ids
            assert cur.prompt_token_ids[: len(history)] == history
            assert len(cur.prompt_token_ids) == len(history) + 5
            assert cur.depends_on == prev.request_id and cur.arrival_step == c
    assert by_id["chat0-t0"].depends_on is None
    assert (
        common_prefix(by_id["chat0-t0"].prompt_token_ids, by_id["chat1-t0"].prompt_token_ids) == 8
    )


def test_rag_prompts_are_documents_in_random_order() -> None:
    w = rag(num_requests=12, num_docs=4, docs_per_request=2, doc_len=10, system_len=6,
            query_len=3, seed=3)  # fmt: skip
    sys_len, doc_len = 6, 10
    docs = {}
    orders = []
    for r in w.requests:
        p = r.prompt_token_ids
        assert len(p) == 6 + 2 * 10 + 3
        body = [p[sys_len + i * doc_len : sys_len + (i + 1) * doc_len] for i in range(2)]
        orders.append(tuple(body))
        for d in body:
            docs.setdefault(d, len(docs))
    assert len(docs) <= 4  # only the shared corpus appears
    pairs = {tuple(docs[d] for d in o) for o in orders}
    assert any((b, a) in pairs for a, b in pairs)  # the same two documents in both orders
    with pytest.raises(ValueError, match="docs_per_request"):
        rag(num_docs=2, docs_per_request=3)


def test_few_shot_alternates_example_sets() -> None:
    w = few_shot(num_requests=4, num_shots=2, instruction_len=5, example_len=6, question_len=2,
                 num_templates=2)  # fmt: skip
    p = [r.prompt_token_ids for r in w.requests]
    assert common_prefix(p[0], p[2]) == 5 + 12 and common_prefix(p[1], p[3]) == 5 + 12
    assert common_prefix(p[0], p[1]) == 5
    with pytest.raises(ValueError, match="num_templates"):
        few_shot(num_templates=0)


def test_workload_request_validation() -> None:
    with pytest.raises(ValueError, match="prompt_token_ids is empty"):
        WorkloadRequest("a", (), 1)
    with pytest.raises(ValueError, match="max_tokens must be an int >= 1"):
        WorkloadRequest("a", (1,), 0)
    with pytest.raises(ValueError, match="arrival_step"):
        WorkloadRequest("a", (1,), 1, -1)
    with pytest.raises(TypeError, match="token ids"):
        WorkloadRequest("a", (1, "x"), 1)  # type: ignore[arg-type]
    r = WorkloadRequest("a", [3, 4], 2)  # lists become tuples, outputs are derived
    assert r.prompt_token_ids == (3, 4) and len(r.output_token_ids) == 2
