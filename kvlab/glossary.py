"""The bilingual glossary: each English term of the course with its one Simplified Chinese term.

The Chinese terms follow the study notes kvlab was built from where they have one (块, 引用计数,
前缀缓存, 驱逐, 槽位映射, 占位块 ...), and every translation in kvlab's zh catalogue uses them: the
terms are entries of that catalogue (``kvlab/locale/zh/LC_MESSAGES/kvlab.po``), so the glossary
page, the views and the tests read one source. vLLM identifiers stay in English beside the term.

Each term has **one** rendering. :data:`ZH_VARIANTS` lists, per term, the other renderings that
were in use and that the term replaces (满块, not 完整块; 占位块, not 空块 ...), with the pattern
that finds them; :func:`find_variants` scans a Chinese text for them (tests/i18n/test_terminology.py
runs it over every Chinese page, notebook and catalogue entry).

Examples:
    >>> from kvlab.glossary import find_variants, glossary
    >>> row = next(r for r in glossary("zh") if r.term == "free queue")
    >>> row.translation, row.identifier
    ('空闲队列', 'FreeKVCacheBlockQueue')
    >>> [(v.term, v.found) for v in find_variants("滑出窗口的块变成空块。")]
    [('null block', '空块')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvlab.i18n import N_, _, use_language

__all__ = ["TERMS", "ZH_VARIANTS", "GlossaryRow", "VariantHit", "find_variants", "glossary",
           "glossary_markdown", "prose"]


@dataclass(frozen=True)
class GlossaryRow:
    """One glossary entry: the English term, its translation, vLLM's identifier, a definition,
    and the Chinese renderings the translation replaces (empty for English)."""

    term: str
    translation: str
    identifier: str
    definition: str
    replaces: tuple[str, ...] = ()


TERMS: tuple[tuple[str, str, str], ...] = (
    (N_("block"), "KVCacheBlock / block_id", N_("A fixed number of tokens' K and V for every layer of a group: the unit the cache allocates, hashes and frees.")),
    (N_("full block"), "cache_full_blocks / num_full_blocks", N_("A block holding block_size tokens: only full blocks get a block_hash and can be shared through the prefix cache.")),
    (N_("block size"), "block_size", N_("Tokens per block (16 by default in vLLM).")),
    (N_("block pool"), "BlockPool", N_("All blocks of the GPU KV cache, with the free queue and the prefix-cache hash map.")),
    (N_("reference count"), "ref_cnt", N_("How many running requests use a block; a block with ref_cnt 0 is in the free queue.")),
    (N_("free queue"), "FreeKVCacheBlockQueue", N_("The doubly linked list of free blocks; its order is the eviction order (least recently freed first).")),
    (N_("queue head"), "popleft / popleft_n", N_("The end of the free queue that get_new_blocks takes blocks from: the block evicted next. free_blocks appends at the other end, the tail.")),
    (N_("in transit"), "ref_cnt == 0, not in free_block_queue", N_("A block between two steps of one pool operation: ref_cnt 0 but not (yet, or no longer) in the free queue.")),
    (N_("prefix caching"), "enable_prefix_caching", N_("Reusing the KV cache of full blocks whose chained hashes match a new request's prefix.")),
    (N_("reuse"), "touch", N_("Using a cached block's KV again for another request (or the same one after preemption) instead of recomputing it.")),
    (N_("block hash"), "block_hash / BlockHash", N_("The hash of a full block's tokens chained with its parent block's hash (and extra keys).")),
    (N_("extra keys"), "generate_block_hash_extra_keys", N_("What enters a block's hash besides its tokens: multimodal inputs, the LoRA adapter, cache_salt, prompt embeddings.")),
    (N_("hash map"), "BlockPool.cached_block_hash_to_block", N_("The prefix cache's index: a flat dict from (block_hash, group id) to the cached block or blocks; not a tree.")),
    (N_("cache hit"), "num_computed_tokens", N_("Tokens of a request found in the prefix cache, whose KV is not recomputed.")),
    (N_("probe"), "get_cached_block", N_("One look-up of one block hash in the hash map during a lookup; the lookup stops at the first miss.")),
    (N_("eviction"), "_maybe_evict_cached_block", N_("Dropping a free block's hash from the prefix cache when the block is reused (lazily, at popleft).")),
    (N_("lazy eviction"), "get_new_blocks", N_("Evicting a cached block only when get_new_blocks pops it from the free queue for new data, not when it is freed.")),
    (N_("invalidate"), "KVCacheManager.evict_blocks", N_("Removing named blocks' hashes from the prefix cache because their KV cannot be trusted (a failed KV-connector load); nothing is freed.")),
    (N_("null block"), "null_block", N_("Block 0: the placeholder in a request's block list for blocks it no longer needs (before its sliding window or its local-attention chunk).")),
    (N_("block list"), "req_to_blocks", N_("The manager-side list of a request's blocks, one per group (SingleTypeKVCacheManager.req_to_blocks); the worker copies it into its block table.")),
    (N_("slot mapping"), "slot_mapping", N_("For each token of a step, the slot (block_id × block_size + offset) its K and V are written to.")),
    (N_("block table"), "BlockTable", N_("The worker-side table of each request's block ids, one row per request.")),
    (N_("attention kernel"), "kvlab.kernels / reshape_and_cache", N_("The GPU program (Triton here) that writes K and V into the paged cache and reads them through the block table.")),
    (N_("Jupyter kernel"), "ipykernel", N_("The Python process behind a notebook; the static pages and exported players work without one.")),
    (N_("fixed point"), "HybridKVCacheCoordinator.find_longest_cache_hit", N_("The hit length every group of a hybrid model agrees on, found by iterating until no group shortens it.")),
    (N_("preemption"), "Scheduler._preempt_request", N_("Freeing a running request's blocks to make room; V1 recomputes it later, or loads back what a KV connector stored (no swapping).")),
    (N_("sliding window"), "SlidingWindowSpec", N_("Attention to the last sliding_window tokens only; older blocks are freed or replaced by the null block.")),
    (N_("chunked prefill"), "max_num_batched_tokens", N_("Computing a long prompt over several steps, a token budget at a time.")),
    (N_("KV cache group"), "KVCacheGroupSpec", N_("Layers that share one block table because they share a KV-cache spec.")),
    (N_("lookup"), "get_computed_blocks", N_("Finding the longest prefix of a request that is in the prefix cache, without taking a reference.")),
    (N_("request"), "Request / request_id", N_("One prompt and its generation, with its block hashes and num_computed_tokens.")),
    (N_("scheduler"), "Scheduler", N_("Decides each step which requests run and how many tokens each computes, and calls allocate_slots.")),
    (N_("admission gate"), "full_sequence_must_fit", N_("The check that a waiting request's whole current sequence fits in the free blocks before it is admitted (scheduler_reserve_full_isl); it reserves nothing.")),
    (N_("KV connector"), "KVConnectorBase_V1", N_("Moves KV between the engine's blocks and somewhere else (another server, CPU memory); a waiting request can load part of its prefix through it.")),
    (N_("KV offloading"), "OffloadingConnector / kv_offloading_size", N_("A KV connector that stores every full block to CPU memory as it is computed and loads it back on a later lookup.")),
    (N_("speculative decoding"), "num_lookahead_tokens / spec_token_ids", N_("Proposing draft tokens that the model verifies in one step; their slots are allocated but never cached, and rejected ones only roll num_computed_tokens back.")),
    (N_("notebook"), "notebooks/NN_*.ipynb", N_("One of the course's numbered Jupyter notebooks.")),
    (N_("study note"), "seeds 000–004", N_("One of the five Chinese study notes on vLLM V1 that kvlab was specified from (see the seed map and the errata).")),
)  # fmt: skip
"""(English term, vLLM identifier, definition): the glossary's source, in glossary order."""


@dataclass(frozen=True)
class Variant:
    """A Chinese rendering that a glossary term replaces.

    Attributes:
        shown: How the glossary page names it (``空块``).
        pattern: A regular expression that finds it in prose (code spans, links and quotations
            already removed, see :func:`prose`).
        only_with: A regular expression the same text must also contain for the pattern to
            count (笔记 is ambiguous only where 笔记本 is near), or None.
    """

    shown: str
    pattern: str
    only_with: str | None = None


ZH_VARIANTS: dict[str, tuple[Variant, ...]] = {
    "full block": (Variant("完整块", "完整块"),),
    "null block": (Variant("空块", "空块"),),
    "queue head": (Variant("队头", "队头"),),
    "in transit": (Variant("中转", "中转"),),
    "reuse": (Variant("沿用（指块、命中或 KV）", r"沿用(?=[^，。；：\n]{0,8}?(?:命中|块|KV|缓存))"),),
    "extra keys": (Variant("附加键", "附加键"), Variant("extra keys", r"(?<![\w`])extra keys")),
    "hash map": (Variant("哈希映射", "哈希映射"),),
    "probe": (Variant("探测", "探测"),),
    "lazy eviction": (Variant("延迟驱逐", "延迟驱逐"), Variant("懒驱逐", "懒惰?驱逐"),
                      Variant("惰性淘汰", "惰性淘汰")),
    "eviction": (Variant("淘汰", "淘汰"),),
    "invalidate": (Variant("使……失效", r"使[^，。；：\n]{0,12}?失效"),),
    "block list": (Variant("块表（指 req_to_blocks）", r"块表\s*[（(]\s*req_to_blocks|req_to_blocks\s*的?块表"),),
    "attention kernel": (Variant("内核（指注意力 kernel）", r"(?<!Jupyter )(?<!Python )内核"),),
    "admission gate": (Variant("准入检查", "准入检查"),),
    "KV connector": (Variant("connector", r"(?<![\w./-])connector(?![\w])"),),
    "study note": (Variant("笔记（与笔记本同在一处时）", r"(?<!学习)笔记(?!本|勘误|对照表)", "笔记本"),),
}
"""English term -> the Chinese renderings it replaces (see Variant)."""

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_CODE = re.compile(r"`[^`\n]*`")
_LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
_HTML = re.compile(r"<[^>\n]+>")
_QUOTED = re.compile(r"「[^」\n]*」|“[^”\n]*”")


def prose(text: str) -> str:
    """``text`` without what is not Chinese prose: fenced code, inline code, link targets, HTML
    tags, and quotations in 「」 or “” (the study notes' section titles and sentences, quoted as
    they are written). Each removed span becomes one space, so positions of words shift."""
    for pattern in (_FENCE, _CODE, _LINK_TARGET, _HTML, _QUOTED):
        text = pattern.sub(" ", text)
    return text


@dataclass(frozen=True)
class VariantHit:
    """A variant found by :func:`find_variants`: the term it should be, the text found, and a
    few characters around it."""

    term: str
    found: str
    context: str


def find_variants(text: str) -> list[VariantHit]:
    """Every rendering of :data:`ZH_VARIANTS` in the prose of ``text`` (markdown or plain text),
    in text order.

    Examples:
        >>> [h.found for h in find_variants("`null_block` 即占位块；见「2.5 缓存完整块」。")]
        []
        >>> [h.term for h in find_variants("驱逐发生在队头，不是 Jupyter 内核里，而是注意力内核里")]
        ['queue head', 'attention kernel']
    """
    flat = re.sub(r"\s+", " ", prose(text))
    hits = []
    for term, variants in ZH_VARIANTS.items():
        for variant in variants:
            if variant.only_with is not None and not re.search(variant.only_with, flat):
                continue
            for m in re.finditer(variant.pattern, flat):
                context = flat[max(0, m.start() - 12): m.end() + 12].replace("\n", " ")
                hits.append((m.start(), VariantHit(term, m.group(0), context)))
    return [hit for _, hit in sorted(hits, key=lambda h: h[0])]


def glossary(lang: str = "zh") -> list[GlossaryRow]:
    """The glossary with terms and definitions in ``lang`` (``en`` gives the English twice and
    no variants).

    Raises:
        ValueError: For a language kvlab does not speak.
    """
    with use_language(lang) as lang:
        return [GlossaryRow(term, _(term), ident, _(definition),
                            tuple(v.shown for v in ZH_VARIANTS.get(term, ())) if lang == "zh" else ())
                for term, ident, definition in TERMS]  # fmt: skip


_PAGE_HEAD = """# Glossary · 术语表

The terms of the course in English and Simplified Chinese, with the vLLM identifier each one
names. vLLM's identifiers stay in English on both sides of kvlab (`block_id`, `ref_cnt`,
`allocate_slots` ...). Every Chinese view, caption and notebook uses these terms, one rendering
per term: the column *replaces* lists the renderings that were also in use and are not any
more. The table is generated from kvlab's translation catalogue (`kvlab.glossary`); a test keeps
this page equal to it, and another fails on a replaced rendering in any Chinese text (the
pages, the notebooks, the catalogue; quotations of the study notes excepted).

课程中的术语及其简体中文译名，以及每个术语对应的 vLLM 标识符。kvlab 的中英文两侧都保留 vLLM
的英文标识符（`block_id`、`ref_cnt`、`allocate_slots` 等）。所有中文视图、说明文字和笔记本都使用
这些译名，每个术语只有一种译法：“取代”一栏列出曾经混用、现已不再使用的译法。本表由 kvlab 的
翻译目录（`kvlab.glossary`）生成，并由测试保证与之一致；另一项测试会在任何中文文本（网页、
笔记本、翻译目录；引用学习笔记原文之处除外）中出现被取代的译法时报错。

| English | 中文 | replaces · 取代 | vLLM | definition | 释义 |
|---|---|---|---|---|---|
"""


def glossary_markdown() -> str:
    """The bilingual glossary page (docs/reference/glossary.md), generated from the catalogue."""
    rows = [f"| {e.term} | {z.translation} | {'、'.join(z.replaces)} | `{e.identifier}` | "
            f"{e.definition} | {z.definition} |"
            for e, z in zip(glossary("en"), glossary("zh"), strict=True)]  # fmt: skip
    return _PAGE_HEAD + "\n".join(rows) + "\n"
