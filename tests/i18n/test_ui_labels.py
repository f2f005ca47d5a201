"""The Chinese prose names the Chinese player's own labels (issue 21): where an English page or
notebook cell quotes a player label in italics (*jump to*, *next*), its Chinese twin quotes the
label the Chinese player shows (*跳转到*, *下一个*), as the catalogue translates it; no Chinese
text quotes an English label."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvlab.i18n import translations
from kvlab.viz.player_strings import PLAYER_STRINGS

REPO = Path(__file__).resolve().parents[2]
ITALIC = re.compile(r"(?<![*\w])\*([^*\n]+?)\*(?![*\w])")
LABELS = set(PLAYER_STRINGS)
NOT_LABELS = {  # italics that happen to spell a label but are emphasis: (text, the words after)
    ("notebooks/05_anatomy_of_allocate_slots.ipynb", "next", " step"),
}


def quoted_labels(name: str, text: str) -> list[str]:
    """The player labels ``text`` quotes in italics (see NOT_LABELS)."""
    out = []
    for m in ITALIC.finditer(text):
        after = text[m.end():m.end() + 5]
        if m.group(1) in LABELS and not any(n == name and w == m.group(1) and after.startswith(a)
                                            for n, w, a in NOT_LABELS):
            out.append(m.group(1))
    return out


def twins() -> list[tuple[str, str, str]]:
    """(name, English text, Chinese text) for every page and notebook markdown cell with a twin."""
    out = []
    for zh in sorted((REPO / "docs").rglob("*.zh.md")):
        en = zh.with_name(zh.name.replace(".zh.md", ".md"))
        out.append((str(en.relative_to(REPO)), en.read_text(encoding="utf-8"),
                    zh.read_text(encoding="utf-8")))
    for zh in sorted((REPO / "notebooks" / "zh").glob("[0-9]*.ipynb")):
        en = REPO / "notebooks" / zh.name
        zh_cells = {c["id"]: "".join(c["source"]) for c in json.loads(zh.read_text())["cells"]}
        for cell in json.loads(en.read_text())["cells"]:
            if cell["cell_type"] == "markdown" and cell["id"] in zh_cells:
                out.append((str(en.relative_to(REPO)), "".join(cell["source"]), zh_cells[cell["id"]]))
    return out


def missing_labels(name: str, en: str, zh: str) -> list[str]:
    """The labels ``en`` quotes that ``zh`` does not quote as the Chinese player shows them."""
    gettext = translations("zh").gettext
    return [f"*{label}* -> *{gettext(label)}*" for label in quoted_labels(name, en)
            if f"*{gettext(label)}*" not in zh or f"*{label}*" in zh]


@pytest.mark.parametrize("name, en, zh", twins(), ids=lambda v: v if isinstance(v, str) and v.startswith(("docs", "notebooks")) else "")
def test_the_chinese_twin_quotes_the_chinese_labels(name: str, en: str, zh: str) -> None:
    assert not missing_labels(name, en, zh), name


def test_the_labels_quoted_are_the_players() -> None:
    quoted = {label for name, en, _zh in twins() for label in quoted_labels(name, en)}
    assert {"jump to", "next"} <= quoted <= LABELS
    gettext = translations("zh").gettext
    assert (gettext("jump to"), gettext("next"), gettext("previous")) == ("跳转到", "下一个", "上一个")


def test_no_chinese_text_quotes_an_english_label() -> None:
    left = [(name, label) for name, _en, zh in twins() for label in quoted_labels(name, zh)]
    assert not left


def test_a_planted_english_label_is_caught() -> None:
    en = "Choose `STEP` in *jump to* and press *next*."
    assert missing_labels("x", en, "在 *跳转到* 中选择 `STEP`，然后按 *下一个*。") == []
    assert missing_labels("x", en, "在 *jump to* 中选择 `STEP`，然后按 *next*。") == [
        "*jump to* -> *跳转到*", "*next* -> *下一个*"]
    assert missing_labels("x", en, "在 *跳至* 中选择 `STEP`，然后按 *下一个*。") == ["*jump to* -> *跳转到*"]
