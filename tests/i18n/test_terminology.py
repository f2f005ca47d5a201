"""One terminology in every Chinese text (issue 21): the glossary's replaced renderings
(kvlab.glossary.ZH_VARIANTS) appear in no Chinese page, notebook markdown cell or catalogue
entry, and the scanner really finds them (planted variants below)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from kvlab.glossary import TERMS, ZH_VARIANTS, find_variants, glossary, prose
from kvlab.i18n import LOCALE_DIR

REPO = Path(__file__).resolve().parents[2]


def chinese_texts() -> dict[str, str]:
    """Every Chinese text of kvlab: docs pages, notebook markdown cells, catalogue entries."""
    texts = {str(p.relative_to(REPO)): p.read_text(encoding="utf-8")
             for p in sorted((REPO / "docs").rglob("*.zh.md"))}  # fmt: skip
    for path in sorted((REPO / "notebooks").glob("**/zh/*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] == "markdown":
                texts[f"{path.relative_to(REPO)} cell {i}"] = "".join(cell["source"])
    with (LOCALE_DIR / "zh" / "LC_MESSAGES" / "kvlab.po").open("rb") as f:
        for m in read_po(f):
            if m.id:
                strings = [m.string] if isinstance(m.string, str) else list(m.string)
                key = m.id if isinstance(m.id, str) else m.id[0]
                texts[f"kvlab.po {key[:50]!r}"] = "\n".join(strings)
    return texts


def test_the_scan_covers_pages_notebooks_and_the_catalogue() -> None:
    names = list(chinese_texts())
    assert sum(n.startswith("docs/") for n in names) >= 15
    assert sum(n.startswith("notebooks/zh/") for n in names) >= 100
    assert sum(n.startswith("kvlab.po") for n in names) >= 500


def test_no_chinese_text_uses_a_replaced_rendering() -> None:
    found = [(name, hit.term, hit.found, hit.context)
             for name, text in chinese_texts().items() for hit in find_variants(text)]  # fmt: skip
    assert not found, "\n".join(f"{n}: {f!r} -> the glossary's {t!r} ({c})" for n, t, f, c in found)


PLANTED = {  # term -> a sentence with one of the renderings it replaces
    "full block": "只有完整块才会被缓存。",
    "null block": "窗口外的块换成空块。",
    "queue head": "从队头弹出一个块。",
    "in transit": "块处于中转状态。",
    "reuse": "后来的请求沿用这些块。",
    "extra keys": "LoRA 适配器是附加键之一。",
    "hash map": "前缀缓存是一个哈希映射。",
    "probe": "每次探测一个块哈希。",
    "lazy eviction": "这就是延迟驱逐。",
    "eviction": "最久未用的块被淘汰。",
    "invalidate": "evict_blocks 使这些块失效。",
    "block list": "req_to_blocks 块表有三行。",
    "attention kernel": "注意力内核读取块表。",
    "admission gate": "准入检查只检查不预留。",
    "KV connector": "由 connector 加载的 KV。",
    "study note": "第 3 个笔记本纠正了笔记中的说法。",
}


@pytest.mark.parametrize("term", sorted(ZH_VARIANTS))
def test_a_planted_variant_is_caught(term: str) -> None:
    hits = find_variants(PLANTED[term])
    assert [h.term for h in hits] == [term], hits


@pytest.mark.parametrize("text", [
    "`null_block` 即占位块，见 `空块` 这个旧写法。",          # inline code
    "笔记的「2.5 缓存完整块」一节。",                          # a quoted section title of the notes
    "问答 7 说“系统采用 LRU 策略淘汰最久未用的块”。",           # a quoted sentence of the notes
    "```python\nx = '空块'\n```\n",                          # fenced code
    "静态页面不需要 Jupyter 内核。",                           # the Jupyter kernel is 内核
    "第 3 个学习笔记说错了。",                                 # 笔记 without 笔记本 nearby
    "见[笔记勘误](errata.md)与笔记本 12。",                    # a page's name
    "沿用 vLLM 的名字。",                                     # 沿用 for names is right
])  # fmt: skip
def test_what_is_not_prose_or_is_right_is_not_flagged(text: str) -> None:
    assert find_variants(text) == []


def test_the_glossary_lists_what_each_term_replaces() -> None:
    rows = {r.term: r for r in glossary("zh")}
    assert set(ZH_VARIANTS) <= {t for t, _i, _d in TERMS}
    assert rows["null block"].translation == "占位块" and rows["null block"].replaces == ("空块",)
    assert rows["full block"].translation == "满块" and "完整块" in rows["full block"].replaces
    assert rows["attention kernel"].translation == "注意力 kernel"
    assert rows["Jupyter kernel"].translation == "Jupyter 内核"
    for term, variants in ZH_VARIANTS.items():  # a term never replaces its own rendering
        assert not find_variants(rows[term].translation), term
        assert all(v.shown != rows[term].translation for v in variants)


def test_prose_drops_code_links_and_quotes() -> None:
    assert prose("a `b` [c](d.md) 「e」 “f” <br>g").split() == ["a", "[c", "g"]
