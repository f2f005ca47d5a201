"""The terminal views and explain() in Chinese (issue #11): glossary terms, no English label
left, vLLM's identifiers and every number the same as in the English render."""

from __future__ import annotations

import html
import inspect
import re
from pathlib import Path

import _zh_checks as _zh
import pytest
from _zh_checks import english_left, english_phrases, identifiers, numbers

from kvlab.i18n import use_language
from kvlab.nanovllm import NanoBlockManager, NanoSequence, record_nano
from kvlab.trace import Trace
from kvlab.trace.explain import explain
from kvlab.viz import allocate_slots_dot, free_queue_dot, hash_chain_dot, render_svg, to_text
from kvlab.viz.figures import write_figures
from kvlab.viz.terminal import (
    render_block_table,
    render_free_queue,
    render_legend,
    render_pool_grid,
)
from kvlab.viz.terminal_calls import (
    render_allocate_slots,
    render_events,
    render_fixed_point,
    render_hash_chain,
    render_state,
)


def _nano_trace() -> Trace:
    """a frees its blocks; b hits two of them (O(n) removes); c probes a stale entry."""
    m = NanoBlockManager(6, 2)
    rec = record_nano(m)
    a = NanoSequence("a", [1, 2, 3, 4, 5], 2)
    m.allocate(a)
    m.deallocate(a)
    b = NanoSequence("b", [1, 2, 3, 4, 9], 2)
    m.allocate(b)
    m.deallocate(b)
    m.allocate(NanoSequence("c", [7, 7, 1, 2, 3, 3], 2))
    return rec.trace()


def _renders(trace: Trace, index: int) -> tuple[str, str]:
    return (
        to_text(render_state(trace, index, lang="en"), width=120),
        to_text(render_state(trace, index, lang="zh"), width=120),
    )


KINDS_LEGEND = "事件类型：\n"
"""Where a Chinese events view starts saying what each event kind shown means (the kinds are
identifiers; the English render has no such legend)."""


def _check_same_facts(en: str, zh: str) -> None:
    assert english_left(zh) == [], "English left in the zh render"
    body, _, legend = zh.partition(KINDS_LEGEND)
    assert numbers(body) == numbers(en), "the numbers differ between en and zh"
    assert all(re.match(r"\s*[A-Z_]+：\S", line) for line in legend.splitlines() if line.strip())
    # kvlab's own status words (pool counts) are translated; vLLM's identifiers are not
    missing = identifiers(en) - identifiers(zh) - {"in_use", "in_transit"}
    assert not missing, missing


def test_the_scan_finds_the_english_of_an_english_render(shared: Trace) -> None:
    en, _ = _renders(shared, 40)
    found = english_left(en)
    # the check can fail: the English render holds many catalogue phrases
    assert len(found) >= 8, found
    assert "evicts first ◀" in found and "free, cached: evictable" in found
    assert len(english_phrases()) > 50


# 40: c's POPLEFT_N (eight blocks in transit); 44: c's REQ_BLOCKS_ADDED (c holds all eight)
@pytest.mark.parametrize("index", [-1, 10, 31, 40, 44, 55])
def test_every_view_of_a_shared_prefix_trace_in_chinese(shared: Trace, index: int) -> None:
    en, zh = _renders(shared, index)
    _check_same_facts(en, zh)
    assert "空闲队列 free_block_queue" in zh and "最先驱逐" in zh
    flat = " ".join(zh.split())  # a narrow table wraps its title
    assert "块列表（req_to_blocks）" in flat or "块列表：没有请求持有块" in zh
    assert "使用中（上标 = ref_cnt）" in zh and "空闲、已缓存：可驱逐" in zh
    assert "哈希链" in zh


@pytest.mark.parametrize("index", [29, 60, 90])
def test_the_hybrid_fixed_point_in_chinese(hybrid: Trace, index: int) -> None:
    en, zh = _renders(hybrid, index)
    _check_same_facts(en, zh)
    assert "混合不动点" in zh and "轮次" in zh and "组 1 · SlidingWindow（窗口 8）" in zh
    assert "占位块与无主的空闲块" in zh


def test_a_nano_vllm_trace_in_chinese() -> None:
    trace = _nano_trace()
    for index in range(-1, len(trace), 7):
        en, zh = _renders(trace, index)
        _check_same_facts(en, zh)
        assert "nano-vllm 至今" in zh or index < 0


def test_each_renderer_takes_lang_and_restores_the_language(shared: Trace) -> None:
    views = [render_pool_grid, render_free_queue, render_block_table, render_allocate_slots,
             render_fixed_point, render_hash_chain, render_events, render_state]  # fmt: skip
    for view in views:
        assert inspect.signature(view).parameters["lang"].default is None, view.__name__
        zh = to_text(view(shared, 40, lang="zh"), width=120)
        assert english_left(zh) == [], view.__name__
        with use_language("zh"):  # None = the current language
            assert to_text(view(shared, 40), width=120) == zh
        with use_language("en"):
            assert to_text(view(shared, 40), width=120) == to_text(view(shared, 40, lang="en"), 120)
    assert "空闲、无内容" in to_text(render_legend(lang="zh"))
    with pytest.raises(ValueError, match="en, zh"):
        render_free_queue(shared, 40, lang="fr")


def test_explain_in_chinese_keeps_the_numbers(shared: Trace) -> None:
    calls = shared.calls(name="get_computed_blocks")
    assert calls
    for call in calls:
        en, zh = str(explain(shared, call, lang="en")), str(explain(shared, call, lang="zh"))
        assert en != zh
        assert english_left(zh) == [], zh
        assert numbers(zh) == numbers(en)
        assert identifiers(en) <= identifiers(zh)
        assert "原因：" in zh
    zh_last = str(explain(shared, calls[-1], lang="zh"))
    assert "空闲队列队首" in zh_last and "被驱逐" in zh_last


def test_explain_of_a_nano_allocate_in_chinese() -> None:
    trace = _nano_trace()
    calls = trace.calls(name="allocate")
    texts = []
    for call in calls:
        en, zh = str(explain(trace, call, lang="en")), str(explain(trace, call, lang="zh"))
        assert english_left(zh) == [], zh
        assert numbers(zh) == numbers(en)
        assert identifiers(en) <= identifiers(zh)
        texts.append(zh)
    assert any("重新启用已释放的缓存块" in t for t in texts)
    assert all("free_block_ids" in t for t in texts)


def test_an_explanation_renders_in_its_own_language(shared: Trace) -> None:
    call = shared.calls(name="get_computed_blocks")[-1]
    e = explain(shared, call, lang="zh")
    with use_language("en"):
        assert str(e).startswith("请求")  # its eviction text is Chinese: so is the rest
    assert str(explain(shared, call, lang="en")).startswith("get_computed_blocks for request")


def _label_text(dot: str) -> str:
    """The labels of a DOT text (what a reader sees), one per line."""
    return "\n".join(re.findall(r'label="((?:[^"\\]|\\.)*)"', dot)).replace("\\n", "\n")


def test_dot_figures_in_chinese(shared: Trace, hybrid: Trace) -> None:
    alloc = shared.calls(name="allocate_slots")
    pairs = [
        (free_queue_dot(shared, 40, lang="en"), free_queue_dot(shared, 40, lang="zh")),
        (hash_chain_dot(shared, 40, lang="en"), hash_chain_dot(shared, 40, lang="zh")),
        (hash_chain_dot(hybrid, 60, lang="en"), hash_chain_dot(hybrid, 60, lang="zh")),
    ] + [(allocate_slots_dot(shared, c, lang="en"), allocate_slots_dot(shared, c, lang="zh"))
         for c in alloc]  # fmt: skip
    for en, zh in pairs:
        assert en != zh
        en_labels, zh_labels = _label_text(en), _label_text(zh)
        assert _zh.english_left(zh_labels) == [], zh_labels
        assert numbers(zh_labels) == numbers(en_labels)
        assert identifiers(en_labels) <= identifiers(zh_labels)
        # the graph itself (nodes, edges, colours) is the same; only labels differ
        assert re.sub(r'label="(?:[^"\\]|\\.)*"', "", en) == re.sub(
            r'label="(?:[^"\\]|\\.)*"', "", zh
        )
    fq = free_queue_dot(shared, 40, lang="zh")
    assert "空闲队列 free_block_queue" in fq and "伪头节点" in fq and "popleft：最先驱逐" in fq
    assert "未缓存" in hash_chain_dot(shared, 40, lang="zh")
    flows = "".join(allocate_slots_dot(shared, c, lang="zh") for c in alloc)
    assert "空闲块够吗？" in flows and "touch 命中的块：ref_cnt + 1" in flows
    svg = render_svg(fq)
    assert "伪头节点" in svg and "<svg" in svg


def test_write_figures_in_chinese(shared: Trace, tmp_path: Path) -> None:
    paths = write_figures(shared, 40, tmp_path, lang="zh")
    queue = (tmp_path / "free_queue.svg").read_text(encoding="utf-8")
    assert "最先驱逐" in queue.replace("&#160;", " ") or "最先驱逐" in html.unescape(queue)
    assert {p.name for p in paths} == {p.name for p in write_figures(shared, 40, tmp_path / "en")}
