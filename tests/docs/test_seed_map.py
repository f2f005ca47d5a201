"""The seed map and the errata page (issue 11): every section of the five study notes is taken to
a place where kvlab runs it, and every erratum links to a notebook section whose cells assert
vLLM 0.22.1's real behaviour. Both languages carry the same rows and links.

Checked on the sources (no site build): notebook anchors are the slugs mkdocs gives the
notebooks' headings; the built site's ids are checked against the same slugs in test_site.py.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[2]
EXPLANATION = REPO / "docs" / "explanation"
# The notes live beside the repository (../shared/seeds), with the vLLM oracle, where present.
SEEDS = Path(os.environ.get("KVLAB_SEEDS", REPO.parent / "shared" / "seeds"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
NB_LINK = re.compile(r"^\.\./tutorials/(\d\d_\w+)\.ipynb#([\w-]+)$")


def slug(heading: str) -> str:
    """The id mkdocs (Python-Markdown's toc) gives a notebook heading."""
    from markdown.extensions.toc import slugify

    return slugify(re.sub(r"[`*]", "", heading), "-")


@functools.cache
def sections(name: str) -> dict[str, list[nbformat.NotebookNode]]:
    """A notebook's cells per heading slug: from the heading to the next heading of its level
    or above (a ``###`` section is also part of its ``##`` one)."""
    nb = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    found: dict[str, list] = {}
    open_: list[tuple[int, str]] = []
    for cell in nb.cells:
        here = []  # headings of this cell: a section closed inside it still holds it
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                m = re.match(r"^(#{2,3}) (.+)$", line)
                if m:
                    level = len(m.group(1))
                    open_ = [(lv, s) for lv, s in open_ if lv < level]
                    open_.append((level, slug(m.group(2))))
                    found.setdefault(open_[-1][1], [])
                    here.append(open_[-1][1])
        for s in dict.fromkeys([*here, *(s for _, s in open_)]):
            found[s].append(cell)
    return found


def rows(page: Path) -> list[list[str]]:
    """The table rows of a page, as lists of cells."""
    out = []
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            out.append([c.strip() for c in line.strip("|").split(" | ")])
    return out[1:]  # without the header


def links(cell: str) -> list[str]:
    return LINK.findall(cell)


def check_link(target: str) -> None:
    m = NB_LINK.match(target)
    if m:
        name, anchor = m.groups()
        assert anchor in sections(name), (target, sorted(sections(name)))
    elif target.startswith("../figures/"):
        assert (REPO / "figures" / target.removeprefix("../figures/")).is_file(), target
    else:
        assert (EXPLANATION / target.split("#")[0]).resolve().is_file(), target


@pytest.mark.parametrize("page", ["seed-map.md", "errata.md"])
def test_both_languages_have_the_same_rows_and_links(page: str) -> None:
    english = rows(EXPLANATION / page)
    chinese = rows(EXPLANATION / page.replace(".md", ".zh.md"))
    assert len(english) == len(chinese) > 5
    for en, zh in zip(english, chinese, strict=True):
        assert en[0] == zh[0]  # the note (seed map) or the number (errata)
        assert [links(c) for c in en] == [links(c) for c in zh], en[0]


@pytest.mark.parametrize("page", ["seed-map.md", "seed-map.zh.md", "errata.md", "errata.zh.md"])
def test_every_link_leads_to_a_section_figure_or_page(page: str) -> None:
    targets = [t for row in rows(EXPLANATION / page) for cell in row for t in links(cell)]
    assert targets
    for target in targets:
        check_link(target)


def test_every_erratum_is_shown_by_an_asserting_cell() -> None:
    errata = rows(EXPLANATION / "errata.md")
    assert [int(r[0]) for r in errata] == list(range(1, len(errata) + 1))
    misconceptions = (EXPLANATION / "misconceptions.md").read_text(encoding="utf-8")
    in_notebook_12 = set()
    for row in errata:
        proofs = links(row[-1])
        assert proofs, row[0]
        for target in proofs:
            name, anchor = NB_LINK.match(target).groups()
            cells = sections(name)[anchor]
            asserting = [c for c in cells if c.cell_type == "code" and "assert " in c.source]
            assert asserting, (row[0], target)  # a running cell asserts the real behaviour
            if name == "12_misconceptions":
                in_notebook_12.add(int(anchor.split("-")[0]))
        assert re.search(r"`vllm/[\w/]+\.py::\w+", row[3]), row[0]  # the source that decides it
    # the misconceptions page's seven points (notebook 12 §1-§7) are all among the errata
    sections_shown = {int(k) for k in re.findall(r"^\|.*\| notebook 12 §(\d+) \|$", misconceptions, re.M)}
    assert sections_shown == set(range(1, 8)) and sections_shown <= in_notebook_12


NOTE_SECTIONS = {  # how each note numbers its sections
    "000_5552b144f670cc23.txt": r"^## (\d+)\. (.+)$",
    "001_536bf35a1efca1ec.txt": r"^## (\d+)\. (.+)$",
    "002_d0f1ce4fdfa02496.txt": r"^## (\d+)\. (.+)$",
    "004_8c76f14c076aeea4.txt": r"^## 5\.(\d+) (.+)$",
}


def _covered(seed_rows: list[list[str]], note: str) -> set[str]:
    """Section numbers the seed map's rows of one note cover (``5.1–5.4`` covers 1..4)."""
    covered = set()
    for row in seed_rows:
        if row[0] != f"`{note}`":
            continue
        m = re.match(r"(?:问答 )?(\d+)(?:\.(\d+))?(?:–\d+\.(\d+))?", row[1])
        if m is None:  # a passage without a number (003's opening flow, its closing remarks)
            continue
        major, minor, last = m.groups()
        if note == "004":
            covered.update(str(i) for i in range(int(minor), int(last or minor) + 1))
        else:
            covered.add(major)
    return covered


SECTIONS_FILE = REPO / "tests" / "data" / "seed_sections.json"
"""The section numbers of the five study notes, recorded from them (a clone has no notes: the
map is checked against this record, and the record against the notes wherever they are)."""


def _sections_of_notes(seeds: Path) -> dict[str, list[str]]:
    found = {}
    for name, pattern in NOTE_SECTIONS.items():
        text = (seeds / name).read_text(encoding="utf-8")
        found[name[:3]] = sorted(
            {n for n, title in re.findall(pattern, text, re.M) if not re.search("总结|小结|导航", title)},
            key=int,
        )
    qa = (seeds / "003_f89a6bec89811928.txt").read_text(encoding="utf-8")
    found["003-qa"] = sorted(set(re.findall(r"^  (\d+)\. \S", qa.split("文末问答", 1)[1], re.M)), key=int)
    return found


def test_the_recorded_sections_are_the_notes_sections() -> None:
    recorded = json.loads(SECTIONS_FILE.read_text(encoding="utf-8"))
    assert all(recorded[k] for k in ("000", "001", "002", "004")) and len(recorded["003-qa"]) == 25
    if SEEDS.is_dir():  # the notes are beside the repository (the team's machines)
        assert _sections_of_notes(SEEDS) == recorded


def test_every_section_of_the_notes_is_mapped() -> None:
    seed_rows = rows(EXPLANATION / "seed-map.md")
    recorded = json.loads(SECTIONS_FILE.read_text(encoding="utf-8"))
    for note in ("000", "001", "002", "004"):
        missing = set(recorded[note]) - _covered(seed_rows, note)
        assert not missing, (note, sorted(missing, key=int))
    answered = {re.match(r"问答 (\d+)", r[1]).group(1) for r in seed_rows if r[1].startswith("问答")}
    assert set(recorded["003-qa"]) == answered
    unnumbered = [r[1] for r in seed_rows if r[0] == "`003`" and not re.match(r"(问答 )?\d", r[1])]
    assert [t.split("（")[0] for t in unnumbered] == ["开篇流程", "kvcache的特点"]


# (note, section number or title) -> identifiers its targets show: each target one or more, all together
KEYS = {
    ("000", "1"): ["KVCacheManager", "BlockPool"], ("000", "2.1"): ["KVCacheBlock", "ref_cnt"],
    ("000", "2.2"): ["KVCacheBlocks"], ("000", "2.3"): ["FullAttentionSpec", "SlidingWindowSpec"],
    ("000", "3.1"): ["KVCacheManager"], ("000", "3.2"): ["allocate_slots"],
    ("000", "3.3"): ["get_computed_blocks"],
    ("000", "4.1"): ["KVCacheCoordinator", "HybridKVCacheCoordinator"],
    ("000", "4.2"): ["get_computed_blocks"],
    ("000", "4.3"): ["round", "HybridKVCacheCoordinator", "fixed point"],
    ("000", "5.1"): ["SingleTypeKVCacheManager"], ("000", "5.2"): ["get_computed_blocks"],
    ("000", "5.3"): ["sliding_window", "null"],
    ("000", "5.4"): ["ChunkedLocalAttentionSpec", "MambaSpec"],
    ("000", "6.1"): ["BlockPool", "null_block"], ("000", "6.2"): ["get_new_blocks", "popleft_n"],
    ("000", "6.3"): ["free_blocks", "evict"], ("000", "6.4"): ["cache_full_blocks"],
    ("000", "6.5"): ["touch"], ("000", "7"): ["queue", "FreeKVCacheBlockQueue", "prev_free_block"],
    ("000", "8.1"): ["block_hash", "NONE_HASH"], ("000", "8.3"): ["extra keys"],
    ("000", "9.1"): ["Qwen3-VL", "get_num_blocks"],
    ("000", "9.2"): ["get_computed_blocks", "touch"],
    ("000", "10"): ["O(1)", "creates every block", "BlockHashToBlockMap", "downward", "BlockStored"],
    ("001", "1"): ["Scheduler", "KVCacheManager"],
    ("001", "2"): ["KVCacheBlocks", "get_num_common_prefix_blocks"],
    ("001", "3.1"): ["num_tokens - 1", "128 - 1", "skip_reading_prefix_cache"],
    ("001", "3.2"): ["allocate_slots"], ("001", "3.3"): ["append_n"],
    ("001", "4.1"): ["block_hash"], ("001", "4.3"): ["life cycle"], ("001", "5"): ["schedule"],
    ("001", "6"): ["block size"], ("001", "7"): ["kvlab.core"], ("002", "1"): ["BlockPool"],
    ("002", "2.1"): ["BlockPool"], ("002", "2.2"): ["popleft_n", "lazy eviction"],
    ("002", "2.3"): ["append_n"], ("002", "2.4"): ["remove"], ("002", "2.5"): ["cache_full_blocks"],
    ("002", "3"): ["free queue", "FreeKVCacheBlockQueue", "O(1)"],
    ("002", "4"): ["BlockHashToBlockMap"],
    ("002", "5.1"): ["BlockTable", "append_row", "move_row", "swap_row"], ("002", "5.3"): ["slot"],
    ("002", "5.4"): ["kernel block"], ("002", "5.5"): ["MultiGroupBlockTable"],
    ("002", "6"): ["kernel", "scheduler"], ("002", "7"): ["O(1)", "popleft_n"],
    ("003", "1"): ["KVCacheBlocks"], ("003", "2"): ["KVCacheManager"],
    ("003", "3"): ["get_computed_blocks"],
    ("003", "4"): ["ext_comp", "delay_cache_blocks", "full_sequence_must_fit"],
    ("003", "5"): ["evict_blocks", "free"], ("003", "问答 1"): ["contiguous"],
    ("003", "问答 2"): ["kernel"], ("003", "问答 3"): ["block_size", "fragmentation"],
    ("003", "问答 4"): ["preempt"], ("003", "问答 5"): ["schedule"],
    ("003", "问答 6"): ["radix", "chain"], ("003", "问答 7"): ["evict"],
    ("003", "问答 8"): ["copy-on-write"], ("003", "问答 9"): ["lookahead", "draft"],
    ("003", "问答 10"): ["sliding"], ("003", "问答 11"): ["allocate_slots"], ("003", "问答 12"): ["slot"],
    ("003", "问答 13"): ["free"], ("003", "问答 14"): ["kernel"], ("003", "问答 15"): ["full block"],
    ("003", "问答 16"): ["chain"], ("003", "问答 17"): ["num_new_computed_tokens"],
    ("003", "问答 18"): ["num_external_computed_tokens"],
    ("003", "问答 19"): ["full_sequence_must_fit"], ("003", "问答 20"): ["delay_cache_blocks"],
    ("003", "问答 21"): ["cache_salt", "prompt_logprobs", "reuse gap"], ("003", "问答 22"): ["prefill"],
    ("003", "问答 23"): ["preempt"],
    ("003", "问答 24"): ["SamplingParams", "prompt_logprobs", "temperature"],
    ("003", "问答 25"): ["bytes"], ("003", "开篇流程"): ["get_computed_blocks", "allocate_slots", "free"],
    ("003", "kvcache的特点"): ["block-table row", "decode step", "gather_kv"],
    ("004", "5.1"): ["NanoBlockManager"], ("004", "5.5"): ["xxhash"], ("004", "5.6"): ["deque"],
    ("004", "5.7"): ["ref_count"], ("004", "5.8"): ["deallocate"],
    ("004", "5.9"): ["can_append", "may_append"],
}  # fmt: skip


def _row_key(row: list[str]) -> tuple[str, str]:
    note, title = row[0].strip("`"), row[1]
    m = re.match(r"(问答 \d+|\d+(?:\.\d+)?)", title)
    return note, m.group(1) if m else title.split("（")[0]


@pytest.mark.parametrize("row", rows(EXPLANATION / "seed-map.md"), ids=lambda r: " ".join(_row_key(r)))
def test_every_target_shows_what_its_section_says(row: list[str]) -> None:
    keys = KEYS[_row_key(row)]
    texts = []
    for target in links(row[2]):
        m = NB_LINK.match(target)
        if m:
            text = " ".join(c.source for c in sections(m.group(1))[m.group(2)])
        elif target.startswith("../figures/"):
            continue
        else:
            text = (EXPLANATION / target.split("#")[0]).read_text(encoding="utf-8")
        text = text.lower()
        assert any(k.lower() in text for k in keys), (target, keys)  # each target is on topic
        texts.append(text)
    assert all(any(k.lower() in t for t in texts) for k in keys), (row[1], keys)


def test_every_key_entry_is_a_row_of_the_map() -> None:
    assert sorted(KEYS) == sorted(_row_key(r) for r in rows(EXPLANATION / "seed-map.md"))


def test_the_key_check_catches_a_wrong_target() -> None:
    wrong = ["`004`", "5.8 序列释放", "[notebook 4](../tutorials/04_block_hashes_and_prefix_caching.ipynb"
             "#the-study-notes-example-one-block-ref_count-2)"]
    with pytest.raises(AssertionError):
        test_every_target_shows_what_its_section_says(wrong)
