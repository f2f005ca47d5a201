"""Every event kind names the vLLM 0.22.1 function it mirrors, the same in Python and the player."""

from __future__ import annotations

import ast
import json
import re
import zipfile
from pathlib import Path

import pytest

from kvlab.trace import EventKind
from kvlab.viz.sources import VLLM_CALL_SOURCES, VLLM_SOURCES, vllm_source, vllm_source_url

REPLAY_JS = Path(__file__).resolve().parents[2] / "kvlab" / "viz" / "static" / "replay.js"
WHEELS = sorted(Path("/work/vllm-wheel").glob("vllm-0.22.1-*.whl"))


def test_every_kind_has_a_source_and_the_player_has_the_same_map() -> None:
    assert set(VLLM_SOURCES) == {k.name for k in EventKind} - {"CALL_BEGIN", "CALL_END"}
    text = REPLAY_JS.read_text(encoding="utf-8")
    js = json.loads(re.search(r"export const VLLM_SOURCES = (\{.*?\n\});", text, re.S).group(1))
    assert js == {"kinds": VLLM_SOURCES, "calls": VLLM_CALL_SOURCES}
    assert vllm_source("TOUCH") == "vllm/v1/core/block_pool.py::BlockPool.touch"
    assert vllm_source("CALL_END", "get_computed_blocks") == (
        "vllm/v1/core/kv_cache_manager.py::KVCacheManager.get_computed_blocks"
    )
    assert vllm_source("CALL_BEGIN", "may_append") is None  # nano-vllm: no vLLM source
    assert vllm_source_url(vllm_source("POPLEFT_N")) == (
        "https://github.com/vllm-project/vllm/blob/v0.22.1/vllm/v1/core/kv_cache_utils.py"
    )
    with pytest.raises(ValueError, match="unknown event kind 'PEEK'"):
        vllm_source("PEEK")


@pytest.mark.skipif(
    not WHEELS, reason="needs the vLLM environment (the vLLM 0.22.1 wheel in /work/vllm-wheel)"
)
def test_every_source_is_a_function_of_vllm_0_22_1() -> None:
    with zipfile.ZipFile(WHEELS[0]) as wheel:
        for src in [*VLLM_SOURCES.values(), *VLLM_CALL_SOURCES.values()]:
            path, qualname = src.split("::")
            cls, func = qualname.split(".")
            tree = ast.parse(wheel.read(path))
            (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
            assert func in {f.name for f in node.body if isinstance(f, ast.FunctionDef)}, src
