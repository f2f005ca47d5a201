"""kvlab's gettext catalogues: the template matches the source, the zh catalogue is complete and
compiled, and the language switch behaves (docs/how-to/translate.md)."""

from __future__ import annotations

import gettext
import re
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po

from kvlab.glossary import TERMS, glossary
from kvlab.i18n import (
    LOCALE_DIR,
    _,
    check_language,
    default_language,
    language,
    translations,
    use_language,
)

REPO = Path(__file__).resolve().parents[2]
POT = LOCALE_DIR / "kvlab.pot"
PO = LOCALE_DIR / "zh" / "LC_MESSAGES" / "kvlab.po"
MO = LOCALE_DIR / "zh" / "LC_MESSAGES" / "kvlab.mo"
PLACEHOLDER = re.compile(r"\{[a-z_]*\}")


def _ids(catalog) -> set:
    return {m.id for m in catalog if m.id}


def test_the_template_is_what_the_source_marks(tmp_path: Path) -> None:
    fresh = tmp_path / "kvlab.pot"
    subprocess.run([sys.executable, "-m", "babel.messages.frontend", "extract", "-F", "babel.cfg",
                    "-k", "N_", "-k", "ngettext:1,2", "--no-location", "--sort-output",
                    "-o", str(fresh), "."], cwd=REPO, check=True, capture_output=True)  # fmt: skip
    with fresh.open("rb") as f, POT.open("rb") as g:
        assert _ids(read_po(f)) == _ids(read_po(g)), "run the commands of docs/how-to/translate.md"


def test_every_message_has_a_chinese_translation() -> None:
    with POT.open("rb") as f, PO.open("rb") as g:
        pot, po = read_po(f), read_po(g)
    assert _ids(po) == _ids(pot)
    for m in po:
        if not m.id:
            continue
        assert m.string, f"untranslated: {m.id!r}"
        assert not m.fuzzy, f"fuzzy: {m.id!r}"
        ids = [m.id] if isinstance(m.id, str) else list(m.id)
        strings = [m.string] if isinstance(m.string, str) else list(m.string)
        for s in strings:
            assert sorted(PLACEHOLDER.findall(s)) == sorted(PLACEHOLDER.findall(ids[0])), m.id
            assert s != ids[0], f"the 'translation' is the English text: {m.id!r}"


def test_the_compiled_catalogue_is_the_po_file() -> None:
    with PO.open("rb") as f, MO.open("rb") as g:
        po, mo = read_po(f), read_mo(g)
    def key(x):  # plural entries: (singular, plural) -> (forms ...)
        return tuple(x) if isinstance(x, (list, tuple)) else x

    def entries(catalog) -> dict:
        return {key(m.id): key(m.string) for m in catalog if m.id}

    assert entries(po) == entries(mo)


def test_use_language_switches_and_restores() -> None:
    with use_language("en"):
        assert _("free queue") == "free queue"
        with use_language("zh_CN.UTF-8") as lang:
            assert lang == "zh" and language() == "zh"
            assert _("free queue") == "空闲队列"
        assert _("free queue") == "free queue"


@pytest.mark.parametrize(("env", "expected"), [
    ({}, "en"),
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LANG": "de_DE.UTF-8"}, "en"),
    ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),
    ({"LANGUAGE": "zh_CN:en", "LANG": "C.UTF-8"}, "zh"),
    ({"KVLAB_LANG": "zh", "LC_ALL": "C"}, "zh"),
    ({"LANG": "zh_TW.UTF-8"}, "en"),
])  # fmt: skip
def test_default_language_follows_the_environment(env: dict, expected: str) -> None:
    assert default_language(env) == expected


@pytest.mark.parametrize("bad", ["fr", "zh_TW", "zh-Hant", "", 3, None])
def test_an_unknown_language_is_refused_naming_the_allowed_ones(bad) -> None:
    with pytest.raises(ValueError, match=r"en, zh"):
        check_language(bad)
    with pytest.raises(ValueError, match=r"en, zh"), use_language(bad if bad is not None else 7):
        pass
    assert language() == default_language()


def test_an_invalid_kvlab_lang_is_an_error_not_english() -> None:
    with pytest.raises(ValueError, match="unknown language 'klingon'"):
        default_language({"KVLAB_LANG": "klingon"})


def test_translations_are_the_standard_library_gettext() -> None:
    zh = translations("zh")
    assert isinstance(zh, gettext.GNUTranslations)
    assert zh.gettext("eviction") == "驱逐"
    assert isinstance(translations("en"), gettext.NullTranslations)


def test_the_glossary_has_every_term_of_the_issue() -> None:
    rows = {r.term: r for r in glossary("zh")}
    assert len(rows) == len(TERMS)
    expected = {"block": "块", "reference count": "引用计数", "free queue": "空闲队列",
                "prefix caching": "前缀缓存", "eviction": "驱逐", "null block": "占位块",
                "slot mapping": "槽位映射", "fixed point": "不动点", "preemption": "抢占"}  # fmt: skip
    assert {t: rows[t].translation for t in expected} == expected
    assert rows["reference count"].identifier == "ref_cnt"
    assert all(r.translation == r.term for r in glossary("en"))


def test_the_glossary_page_is_generated_from_the_catalogue() -> None:
    from kvlab.glossary import glossary_markdown

    page = (REPO / "docs" / "reference" / "glossary.md").read_text(encoding="utf-8")
    assert page == glossary_markdown(), (
        'regenerate: python -c "from kvlab.glossary import glossary_markdown; '
        "open('docs/reference/glossary.md', 'w').write(glossary_markdown())\""
    )


CJK = re.compile(r"[\u4e00-\u9fff]")
_CODE = re.compile(r"O\([n1]\)|https?://\S+|[\w.\[\]]+\([\w, ]*\)"
                   r"|[0-9A-Za-z_.]+(?:,[0-9A-Za-z_.]+)+")
"""Code inside a Chinese sentence keeps its ASCII punctuation: O(n), a URL, a call f(x), an
option's comma-separated value as it is typed (1e5,1e6)."""


def test_chinese_sentences_use_full_width_punctuation() -> None:
    with PO.open("rb") as f:
        po = read_po(f)
    for m in po:
        text = m.string if isinstance(m.string, str) else " ".join(m.string)
        if m.id and CJK.search(text):
            assert not re.search(r"[,;:()]", re.sub(_CODE, "", text)), (m.id, text)
