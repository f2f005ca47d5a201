"""Lab block_hash: the reference is byte-identical to vLLM; each catalogued mistake gets its hint."""
from __future__ import annotations

import pytest

from buggy_block_hash import BUGS
from kvlab.core import kv_cache_utils
from kvlab.labs import check, lab
from kvlab.labs.solutions import reference


@pytest.mark.parametrize("impl", [reference("block_hash"), kv_cache_utils], ids=["reference", "kvlab"])
def test_correct_hashing_passes_every_scenario(impl) -> None:
    result = check("block_hash", impl, seed=0)
    assert result.passed, str(result)
    assert result.scenarios_passed == result.scenarios_total == len(lab("block_hash").scenarios(0))


WHERE = {
    "no_chain": (4, "hash_block_tokens"), "none_parent": (0, "hash_block_tokens"),
    "list_tokens": (0, "hash_block_tokens"), "not_bytes": (0, "hash_block_tokens"),
    "no_extra_keys": (17, "request"), "salt_every_block": (17, "request"),
    "mm_absolute_offset": (19, "request"), "partial_block": (16, "request"), "rehash_all": (16, "request"),
}
HINTS = {
    "no_chain": "the hash is chained to the parent's", "none_parent": "NONE_HASH is the first block's parent",
    "list_tokens": "the block's tokens are hashed as a tuple", "not_bytes": "the hash function makes the block hash",
    "no_extra_keys": "extra keys: same tokens, different cache entries",
    "salt_every_block": "cache_salt keys the first block only",
    "mm_absolute_offset": "a multimodal key is (identifier, offset from the block start)",
    "partial_block": "only full blocks are hashed", "rehash_all": "the hasher returns only the new blocks' hashes",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_mistake_gets_its_hint_at_its_divergence(name: str) -> None:
    result = check("block_hash", BUGS[name], seed=0)
    assert result.misconception == f"block_hash.{name}", str(result)
    div = result.divergence
    assert (div.scenario, div.step, div.op, div.field) == ("vLLM 0.22.1 · hash · 0", *WHERE[name], "return value")
    assert result.hint.startswith(HINTS[name]) and "(notebook 04, section “" in result.hint


def test_only_the_three_functions_are_taken() -> None:
    result = check("block_hash", reference("block_hash")[:2])
    assert result.status == "invalid"
    assert result.message == ("this lab takes the functions hash_block_tokens, generate_block_hash_extra_keys, "
                              "get_request_block_hasher; missing: get_request_block_hasher")
