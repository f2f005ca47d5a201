"""The shipped vLLM 0.22.1 lab fixtures: small, complete, and kvlab's reference replays them exactly."""
from __future__ import annotations

from importlib import resources

import pytest

from kvlab.labs.direct import HashSide, QueueSide
from kvlab.labs.engine import hash_seeded, replay
from kvlab.labs.fixtures import KINDS, decode_recordings, load_recordings
from kvlab.labs.sides import ManagerSide

SIDES = {"queue": QueueSide, "hash": HashSide, "manager": ManagerSide}


def test_the_fixtures_are_small_and_from_vllm_0_22_1() -> None:
    total = 0
    for kind in KINDS:
        data = resources.files("kvlab.labs").joinpath("data", f"{kind}.cbor.gz").read_bytes()
        total += len(data)
        header, recs = decode_recordings(data)
        assert header["vllm"] == "0.22.1" and header["kind"] == kind
        assert recs and all(r.source == "vLLM 0.22.1" for r in recs)
    assert total < 400_000


def test_the_manager_fixtures_cover_every_family_and_feature() -> None:
    recs = load_recordings("manager")
    families = {r.config["family"] for r in recs}
    assert families >= {"full", "sw", "chunked", "full+sw", "full+2sw", "full+chunked", "mixed:full8+sw4",
                        "mixed:full4+sw8", "full+full(heads)"}
    ops = {st.op for r in recs for st in r.steps}
    assert ops >= {"add_request", "get_computed_blocks", "allocate_slots", "append_tokens", "preempt",
                   "finish", "cache_blocks", "remove_skipped_blocks", "evict_blocks", "reset_prefix_cache",
                   "new_step_starts", "take_new_block_ids", "get_num_common_prefix_blocks",
                   "make_prefix_cache_stats"}
    assert any(r.config["use_eagle"] for r in recs) and any(r.config["extras"] for r in recs)
    assert any(st.op == "allocate_slots" and st.want is None for r in recs for st in r.steps)  # out of blocks
    assert any(st.op == "allocate_slots" and st.args[6] > 0 for r in recs for st in r.steps)  # connector tokens
    events = {e[0] for r in recs for st in r.steps for e in st.state.get("events", [])}
    assert events >= {"BlockStored", "BlockRemoved"}
    assert any(len(ids) > 1 for r in recs for st in r.steps for ids in st.state["cached map"].values())
    assert {r.config["hash_fn"] for r in recs} == {"sha256", "sha256_cbor"}


@pytest.mark.parametrize("kind", KINDS)
def test_kvlab_makes_every_recorded_decision(kind: str) -> None:
    for i, rec in enumerate(load_recordings(kind)):
        with hash_seeded(rec.config.get("hash_fn", "sha256")):
            div = replay(rec, lambda rec=rec: SIDES[kind](rec.config), "fixtures", f"{kind} {i}")
        assert div is None, div.describe()
