"""The shipped Mooncake excerpts read cleanly and replay on every cache."""

from pathlib import Path

import pytest

from kvlab.traffic import infinite_hits, prepare_blocks, read_mooncake, replay_sequence

DATA = Path(__file__).parents[1] / "data" / "mooncake"


@pytest.mark.parametrize("name", ["conversation_excerpt.jsonl", "synthetic_excerpt.jsonl"])
def test_excerpt_vllm_with_room_for_all_equals_infinite(name):
    reqs = read_mooncake(DATA / name)
    assert len(reqs) == 300
    b = prepare_blocks(reqs, 512)
    room = sum(r.num_prompt_tokens for r in reqs) + 512 * len(reqs)
    assert replay_sequence(b, "vllm", room).per_request_hit_tokens == infinite_hits(b)
    assert replay_sequence(b, "radix", room).per_request_hit_tokens == infinite_hits(b)
