"""Reading kvlab next to vLLM (issue 17, "Side by side"), only in the vLLM environment.

Every mirrored function has vLLM 0.22.1's statements in vLLM's order, or a NOTE in its body says
why not; and every function the issue names is mirrored. Runs benchmarks/side_by_side.py's
comparison on the installed vLLM's source and this tree's kvlab/core, one test per mirrored
function, so a failure names the function and its first differing statement. The definitions
(body lines, hook lines, statement sequence, NOTE) are in that script's docstring.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import side_by_side  # noqa: E402


def _skip_reason() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return "needs the vLLM environment (vLLM 0.22.1 importable)"
    version = importlib.metadata.version("vllm")
    if version != "0.22.1":
        return f"needs the vLLM environment (vLLM 0.22.1 importable; found vLLM {version})"
    return None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))

ROWS, MISSING = (side_by_side.build(side_by_side.vllm_core_dir(), REPO / "kvlab" / "core")
                 if _skip_reason() is None else ([], []))

# What issue 17 names as mirrored: every method of these vLLM classes and these module functions.
CLASSES = {
    "kv_cache_manager.py": ["KVCacheBlocks", "KVCacheManager"],
    "kv_cache_coordinator.py": ["KVCacheCoordinator", "KVCacheCoordinatorNoPrefixCache",
                                "UnitaryKVCacheCoordinator", "HybridKVCacheCoordinator"],
    "single_type_kv_cache_manager.py": [
        "SingleTypeKVCacheManager", "FullAttentionManager", "SlidingWindowManager",
        "ChunkedLocalAttentionManager", "MambaManager", "CrossAttentionManager",
        "SinkFullAttentionManager"],
    "block_pool.py": ["BlockHashToBlockMap", "BlockPool"],
    "kv_cache_utils.py": ["KVCacheBlock", "FreeKVCacheBlockQueue", "BlockHashListWithBlockSize"],
}
FUNCTIONS = {
    "kv_cache_coordinator.py": ["get_kv_cache_coordinator"],
    "single_type_kv_cache_manager.py": ["get_manager_for_kv_cache_spec"],
    "kv_cache_utils.py": [
        "hash_block_tokens", "get_request_block_hasher", "generate_block_hash_extra_keys",
        "_gen_mm_extra_hash_keys", "_gen_lora_extra_hash_keys",
        "_gen_prompt_embeds_extra_hash_keys",
        "need_extra_keys", "init_none_hash", "make_block_hash_with_group_id", "get_block_hash",
        "get_group_id", "maybe_convert_block_hash",
        "get_kv_cache_configs", "get_kv_cache_groups", "get_kv_cache_config_from_groups",
        "unify_hybrid_kv_cache_specs", "unify_kv_cache_spec_page_size",
        "check_enough_kv_cache_memory",
        "max_memory_usage_bytes", "estimate_max_model_len", "_max_memory_usage_bytes_from_groups",
        "_estimate_max_model_len_from_groups", "_auto_fit_max_model_len",
        "_project_kv_cache_groups_to_worker", "get_num_blocks", "may_override_num_blocks"],
    "sched/scheduler.py": ["Scheduler.schedule", "Scheduler._preempt_request",
                           "Scheduler._update_after_schedule",
                           "Scheduler._make_cached_request_data"],
}


def _named_by_the_issue() -> list[tuple[str, str]]:
    every = [(r.vllm_file, r.name) for r in ROWS] + [(m.vllm_file, m.name) for m in MISSING]
    named = {(f, n) for f, names in FUNCTIONS.items() for n in names}
    named |= {(f, n) for f, n in every for c in CLASSES.get(f, []) if n.startswith(c + ".")}
    return sorted(named)


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.vllm_file}::{r.name}" for r in ROWS])
def test_mirrored_function_has_vllms_statements_or_a_note(row):
    assert row.status != "no", (
        f"kvlab's {row.name} ({row.kvlab_file}:{row.kvlab_line}) differs from vLLM's "
        f"({row.vllm_file}:{row.vllm_line}) without a NOTE naming vLLM or kvlab: {row.first_diff}")


def test_every_function_the_issue_names_is_mirrored():
    mirrored = {(r.vllm_file, r.name) for r in ROWS}
    named = _named_by_the_issue()
    assert len(named) > 100  # the classes were found in vLLM's files
    missing = [f"{f}::{n}" for f, n in named if (f, n) not in mirrored]
    assert missing == []
