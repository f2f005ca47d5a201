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
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                m = re.match(r"^(#{2,3}) (.+)$", line)
                if m:
                    level = len(m.group(1))
                    open_ = [(lv, s) for lv, s in open_ if lv < level]
                    open_.append((level, slug(m.group(2))))
                    found.setdefault(open_[-1][1], [])
        for _, s in open_:
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
    shown = 0
    for row in errata:
        proofs = links(row[-1])
        assert proofs, row[0]
        for target in proofs:
            name, anchor = NB_LINK.match(target).groups()
            cells = sections(name)[anchor]
            asserting = [c for c in cells if c.cell_type == "code" and "assert " in c.source]
            assert asserting, (row[0], target)  # a running cell asserts the real behaviour
        shown += any("12_misconceptions" in t for t in proofs)
    # the misconceptions page's seven points are all among the errata
    assert shown == len(re.findall(r"^\| \d \|", misconceptions, re.M)) == 7


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
