"""manager_config: what a trace records about its manager."""

from __future__ import annotations

import json

from _trace_helpers import make_manager

from kvlab.trace.metadata import block_size_of_config, manager_config


def test_hybrid_manager_metadata() -> None:
    cfg = manager_config(make_manager(32, hybrid=True, sliding_window=8, use_eagle=True))
    assert cfg["num_gpu_blocks"] == 32 and cfg["num_groups"] == 2
    assert [(g["spec"], g["block_size"], g["sliding_window"]) for g in cfg["groups"]] == [
        ("FullAttentionSpec", 4, None),
        ("SlidingWindowSpec", 4, 8),
    ]
    assert cfg["coordinator"] == "HybridKVCacheCoordinator"
    assert cfg["use_eagle"] and cfg["eagle_group_ids"] == [0, 1]
    assert (cfg["null_block_id"], cfg["hash_block_size"], cfg["enable_caching"]) == (0, 4, True)
    assert json.loads(json.dumps(cfg)) == cfg


def test_block_size_of_config_falls_back_to_hash_block_size_then_16() -> None:
    assert block_size_of_config({"groups": [{"block_size": 32}], "hash_block_size": 8}) == 32
    assert block_size_of_config({"groups": [], "hash_block_size": 8}) == 8
    assert block_size_of_config({}) == 16
