"""Cache-design adapters: the views ask the trace's design, so a fourth design is one new class."""

from __future__ import annotations

import pytest

from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SamplingParams,
    get_request_block_hasher,
    init_none_hash,
    sha256,
)
from kvlab.trace import Recorder, Trace, explain
from kvlab.trace import designs as designs_mod
from kvlab.trace.designs import CacheDesign, UnknownDesign, design_of, designs, register
from kvlab.viz import render_free_queue, to_text
from kvlab.viz.design_header import cache_design, event_notes, render_cache_header
from kvlab.viz.hash_tree import lookup_call_names


def _vllm_trace() -> Trace:
    init_none_hash(sha256)
    spec = FullAttentionSpec(block_size=2, num_kv_heads=1, head_size=1, dtype="float32")
    manager = KVCacheManager(KVCacheConfig(6, [], [KVCacheGroupSpec(["l0"], spec)]),
                             max_model_len=64, hash_block_size=2)  # fmt: skip
    rec = Recorder().attach(manager)
    hasher = get_request_block_hasher(2, sha256)
    for rid in ("a", "b"):
        req = Request(rid, [1, 2, 3, 4, 5], SamplingParams(max_tokens=2), None, block_hasher=hasher)
        hit_blocks, num_hit = manager.get_computed_blocks(req)
        manager.allocate_slots(req, req.num_tokens - num_hit, num_hit, hit_blocks)
        req.num_computed_tokens = req.num_tokens
        manager.free(req)
    return rec.trace()


def test_the_built_in_designs_are_registered_by_name() -> None:
    titles = {d.names: d.title for d in designs()}
    assert titles[(None, "vllm-v1")].startswith("vLLM V1")
    assert titles[("nano-vllm",)].startswith("nano-vllm BlockManager")
    assert titles[("vllm-kv-events",)].startswith("vLLM KV events")
    assert design_of({}) is design_of({"cache": "vllm-v1"})
    assert design_of({"cache": "nano-vllm"}).lookup_call_names == ("get_computed_blocks", "allocate")


def test_an_unknown_design_is_shown_as_given_and_read_as_vllm() -> None:
    d = design_of({"cache": "lmcache?"})
    assert isinstance(d, UnknownDesign) and d.title == "lmcache?"
    assert d.lookup_call_names == ("get_computed_blocks",)
    assert cache_design({"cache": "lmcache?"}) == "lmcache?"


class _ToyDesign(CacheDesign):
    names = ("toy-cache",)
    title = "a toy cache (one class, no view edited)"
    lookup_call_names = ("get_computed_blocks", "toy_lookup")

    def queue_labels(self, length: int) -> tuple[str, str]:
        return f"toy stack · {length} blocks", "◀ toy pushes here"

    def header_lines(self, trace, index: int) -> list[str]:
        return [f"toy counter at #{index}"]

    def event_notes(self, trace, first: int, last: int) -> dict[int, str]:
        return {first: "toy note"}

    def explain_call(self, trace, call):
        return f"toy explanation of {call.name} #{call.begin}"


@pytest.fixture
def toy_trace():
    design = register(_ToyDesign())
    trace = _vllm_trace()
    trace.config["cache"] = "toy-cache"
    yield trace
    for name in design.names:
        designs_mod._REGISTRY.pop(name)


def test_a_fourth_design_reaches_every_view_through_its_adapter(toy_trace: Trace) -> None:
    t = toy_trace
    assert " ".join(to_text(render_cache_header(t, 3)).split()) == (
        "cache design: a toy cache (one class, no view edited) toy counter at #3")
    text = " ".join(to_text(render_free_queue(t, len(t) - 1)).split())
    assert text.startswith("toy stack · 5 blocks") and text.endswith("◀ toy pushes here")
    assert event_notes(t, 4, 9) == {4: "toy note"}
    assert lookup_call_names(t.config) == ("get_computed_blocks", "toy_lookup")
    lookup = next(c for c in t.calls(name="get_computed_blocks"))
    assert explain(t, lookup.begin) == f"toy explanation of get_computed_blocks #{lookup.begin}"


def test_register_refuses_a_taken_name_and_a_non_design() -> None:
    with pytest.raises(ValueError, match="'nano-vllm' is already registered"):
        register(type("Clash", (CacheDesign,), {"names": ("nano-vllm",), "title": "x"})())
    with pytest.raises(TypeError, match="takes a CacheDesign, got str"):
        register("nano-vllm")  # type: ignore[arg-type]
    assert design_of({"cache": "nano-vllm"}).title.startswith("nano-vllm BlockManager")


def test_vllm_traces_keep_vllm_wording() -> None:
    t = _vllm_trace()
    assert render_cache_header(t, 0).plain == (
        "cache design: vLLM V1 (BlockPool + FreeKVCacheBlockQueue, kvlab.core)")
    assert event_notes(t, 0, len(t) - 1) == {}
    text = " ".join(to_text(render_free_queue(t, len(t) - 1)).split())
    assert text.startswith("free_block_queue · 5 blocks · popleft takes from the left")
