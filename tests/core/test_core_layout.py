"""kvlab.core's files follow vLLM's: split by concept, no two files importing each other.

Every import between kvlab.core modules is read from the source (type-hint-only imports
included). The only pair allowed to import each other is the one vLLM has too:
kv_cache_utils imports Request, and request imports BlockHash for its annotations.
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "kvlab" / "core"
# vllm/v1/core/kv_cache_utils.py <-> vllm/v1/request.py (TYPE_CHECKING on the request side).
VLLM_PAIRS = {frozenset({"kvlab.core.kv_cache_utils", "kvlab.core.request"})}


def _module(path: Path) -> str:
    rel = path.relative_to(CORE.parent.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "kvlab.core":  # from kvlab.core import kv_cache_utils
                found.update(f"kvlab.core.{a.name}" for a in node.names)
            elif node.module.startswith("kvlab.core."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("kvlab.core."))
    return found


def test_no_two_core_files_import_each_other():
    graph = {
        _module(p): _imports(p)
        for p in CORE.rglob("*.py")
        if p.name != "__init__.py"
    }
    cycles = {
        frozenset({a, b})
        for a, deps in graph.items()
        for b in deps
        if b in graph and a in graph[b] and a != b
    }
    assert cycles - VLLM_PAIRS == set()


def test_the_files_of_vllms_names_hold_the_mirrored_classes():
    names = {p.name for p in CORE.glob("*.py")}
    for vllm_file in ("block_pool.py", "kv_cache_utils.py", "single_type_kv_cache_manager.py",
                      "kv_cache_coordinator.py", "kv_cache_manager.py", "kv_cache_interface.py",
                      "kv_cache_metrics.py", "request.py"):
        assert vllm_file in names
    # No module left over from the size-based splits.
    assert not names & {"block_hash.py", "kv_cache_block.py", "kv_cache_blocks.py",
                        "kv_cache_manager_alloc.py", "kv_cache_manager_checks.py",
                        "kv_cache_sizing.py", "block_pool_checks.py"}
    assert not (CORE / "managers").exists() and not (CORE / "coordinators").exists()
