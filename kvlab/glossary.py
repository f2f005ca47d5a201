"""The bilingual glossary: each English term of the course with its Simplified Chinese term.

The Chinese terms follow the study notes kvlab was built from where they have one (块, 引用计数,
前缀缓存, 驱逐, 槽位映射 ...), and every translation in kvlab's zh catalogue uses them: the terms
are entries of that catalogue (``kvlab/locale/zh/LC_MESSAGES/kvlab.po``), so the glossary page,
the views and the tests read one source. vLLM identifiers stay in English beside the term.

Examples:
    >>> from kvlab.glossary import glossary
    >>> row = next(r for r in glossary("zh") if r.term == "free queue")
    >>> row.translation, row.identifier
    ('空闲队列', 'FreeKVCacheBlockQueue')
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.i18n import N_, _, use_language

__all__ = ["TERMS", "GlossaryRow", "glossary", "glossary_markdown"]


@dataclass(frozen=True)
class GlossaryRow:
    """One glossary entry: the English term, its translation, vLLM's identifier, a definition."""

    term: str
    translation: str
    identifier: str
    definition: str


TERMS: tuple[tuple[str, str, str], ...] = (
    (N_("block"), "KVCacheBlock / block_id", N_("A fixed number of tokens' K and V for every layer of a group: the unit the cache allocates, hashes and frees.")),
    (N_("block size"), "block_size", N_("Tokens per block (16 by default in vLLM).")),
    (N_("block pool"), "BlockPool", N_("All blocks of the GPU KV cache, with the free queue and the prefix-cache hash map.")),
    (N_("reference count"), "ref_cnt", N_("How many running requests use a block; a block with ref_cnt 0 is in the free queue.")),
    (N_("free queue"), "FreeKVCacheBlockQueue", N_("The doubly linked list of free blocks; its order is the eviction order (least recently freed first).")),
    (N_("prefix caching"), "enable_prefix_caching", N_("Reusing the KV cache of full blocks whose chained hashes match a new request's prefix.")),
    (N_("block hash"), "block_hash / BlockHash", N_("The hash of a full block's tokens chained with its parent block's hash (and extra keys).")),
    (N_("cache hit"), "num_computed_tokens", N_("Tokens of a request found in the prefix cache, whose KV is not recomputed.")),
    (N_("eviction"), "_maybe_evict_cached_block", N_("Dropping a free block's hash from the prefix cache when the block is reused (lazily, at popleft).")),
    (N_("null block"), "null_block", N_("Block 0: the placeholder in a request's block list for blocks it no longer needs (before its sliding window or its local-attention chunk).")),
    (N_("slot mapping"), "slot_mapping", N_("For each token of a step, the slot (block_id × block_size + offset) its K and V are written to.")),
    (N_("block table"), "BlockTable", N_("The worker-side table of each request's block ids, one row per request.")),
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
)  # fmt: skip
"""(English term, vLLM identifier, definition): the glossary's source, in glossary order."""


def glossary(lang: str = "zh") -> list[GlossaryRow]:
    """The glossary with terms and definitions in ``lang`` (``en`` gives the English twice).

    Raises:
        ValueError: For a language kvlab does not speak.
    """
    with use_language(lang):
        return [GlossaryRow(term, _(term), ident, _(definition)) for term, ident, definition in TERMS]


_PAGE_HEAD = """# Glossary · 术语表

The terms of the course in English and Simplified Chinese, with the vLLM identifier each one
names. vLLM's identifiers stay in English on both sides of kvlab (`block_id`, `ref_cnt`,
`allocate_slots` ...). Every Chinese view, caption and notebook uses these terms; the table is
generated from kvlab's translation catalogue (`kvlab.glossary`), and a test keeps this page equal
to it.

课程中的术语及其简体中文译名，以及每个术语对应的 vLLM 标识符。kvlab 的中英文两侧都保留 vLLM
的英文标识符（`block_id`、`ref_cnt`、`allocate_slots` 等）。所有中文视图、说明文字和笔记本都使用
这些译名；本表由 kvlab 的翻译目录（`kvlab.glossary`）生成，并由测试保证与之一致。

| English | 中文 | vLLM | definition | 释义 |
|---|---|---|---|---|
"""


def glossary_markdown() -> str:
    """The bilingual glossary page (docs/reference/glossary.md), generated from the catalogue."""
    rows = [f"| {e.term} | {z.translation} | `{e.identifier}` | {e.definition} | {z.definition} |"
            for e, z in zip(glossary("en"), glossary("zh"), strict=True)]  # fmt: skip
    return _PAGE_HEAD + "\n".join(rows) + "\n"
