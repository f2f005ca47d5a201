"""kvlab.core makes vLLM 0.22.1's decisions on the recorded oracle workloads (no vLLM needed).

The fixtures hold the real vLLM 0.22.1's return values and observable state after every operation
(free-queue order, ref_cnt and hash per block, cached map, block ids per request, events ...) for a few
hundred randomized seeds over every config family; ``record_fixtures.py`` regenerates them in the
oracle environment (docs/explanation/fidelity.md).
"""
from __future__ import annotations

import functools
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracle_replay import FIXTURES, load_fixture, replay_record  # noqa: E402

FILES = sorted(FIXTURES.glob("seeds_*.cbor.gz"))


@functools.lru_cache(maxsize=2)
def _doc(name: str) -> dict:
    return load_fixture(FIXTURES / name)


def test_fixtures_cover_every_config_family_from_vllm_0_22_1():
    assert len(FILES) >= 8, f"expected the recorded fixtures under {FIXTURES}"
    families: Counter = Counter()
    seeds = set()
    for path in FILES:
        doc = _doc(path.name)
        assert doc["vllm"] == "0.22.1"
        for rec in doc["records"]:
            families[rec["family"]] += 1
            seeds.add(rec["seed"])
        accepted = set(doc["accepted_families"])
    assert len(seeds) >= 200
    assert set(families) == accepted, f"families never drawn: {accepted - set(families)}"
    assert len(accepted) >= 10


@pytest.mark.parametrize("name", [p.name for p in FILES])
def test_kvlab_replays_vllm_decisions(name):
    doc = _doc(name)
    steps = 0
    for rec in doc["records"]:
        steps += replay_record(rec)
    assert steps > 1000 * len(doc["records"])
