"""The CJK font kvlab ships (kvlab/fonts): it holds every character the Chinese charts draw, it
is what they draw with whatever the machine has installed, and it keeps the OFL's notices."""

import json
import re
import warnings
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_file
from click.testing import CliRunner
from fontTools.ttLib import TTFont
from matplotlib import font_manager

from kvlab.charts import figure_svg, language_rc
from kvlab.cli import main
from kvlab.fonts import CJK_FAMILY, CJK_FONT, CJK_MANIFEST
from kvlab.font_subset import chart_characters
from kvlab.font_subset import main as subset_main
from kvlab.i18n import LANGUAGES, translations, use_language
from kvlab.traffic import hit_rate_figure
from kvlab.traffic import plot as plot_module
from kvlab.traffic.plot import CHART_TEXTS

RERUN = ("rerun the subset script with Noto Sans CJK SC: .venv/bin/python -m kvlab.font_subset "
         "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc (apt-get install fonts-noto-cjk)")
LINES = [
    '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}',
    '{"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}',
]
ROWS = [{"cache": "infinite", "capacity_tokens": None, "block_size": 512, "hit_rate": 0.5},
        {"cache": "vllm", "capacity_tokens": 1024, "block_size": 512, "hit_rate": 0.25},
        {"cache": "vllm", "capacity_tokens": 4096, "block_size": 512, "hit_rate": 0.5},
        {"cache": "radix", "capacity_tokens": 1024, "block_size": 512, "hit_rate": 0.25},
        {"cache": "radix", "capacity_tokens": 4096, "block_size": 512, "hit_rate": 0.5}]


def _glyph_fonts(svg: str) -> set[str]:
    """The fonts whose glyphs an SVG (text as paths) uses: ids are <PostScript name>-<code>."""
    return set(re.findall(r'<path id="([A-Za-z][\w-]*?)-[0-9a-f]+"', svg))


def test_every_character_of_every_chinese_chart_text_is_in_the_font():
    cmap = TTFont(CJK_FONT)["cmap"].getBestCmap()
    missing = {}
    for lang in (lang for lang in LANGUAGES if lang != "en"):
        for msgid in CHART_TEXTS.values():
            text = re.sub(r"\{\w+\}", "", translations(lang).gettext(msgid))
            lacking = "".join(sorted({c for c in text if ord(c) not in cmap}))
            if lacking:
                missing[msgid] = lacking
    assert missing == {}, f"kvlab/fonts/kvlab-cjk.otf lacks these characters: {missing}; {RERUN}"
    assert set(chart_characters()) <= {chr(c) for c in cmap}, RERUN
    assert json.loads(CJK_MANIFEST.read_text(encoding="utf-8"))["characters"] == \
        chart_characters(), f"kvlab/fonts/kvlab-cjk.json is older than the chart texts; {RERUN}"


def test_chart_texts_list_every_text_the_curve_draws():
    """A label marked directly with _() in plot.py would escape the font test above."""
    plot_py = Path(plot_module.__file__)
    marked = {msg for _line, msg, _comments, _ctx in
              extract_from_file("python", plot_py, keywords={"_": None, "N_": None})}
    assert marked == set(CHART_TEXTS.values()), \
        "kvlab/traffic/plot.py draws a text not in CHART_TEXTS: add it there, then " + RERUN


def test_the_subset_keeps_the_licence_notices_under_a_name_of_its_own():
    font = TTFont(CJK_FONT)
    names = {r.nameID: r.toUnicode() for r in font["name"].names if r.platformID == 3}
    assert (names[1], names[4], names[6]) == (CJK_FAMILY, CJK_FAMILY, "kvlabCJK-Regular")
    assert names[0] == "© 2014-2021 Adobe (http://www.adobe.com/)."
    assert "SIL Open Font License, Version 1.1" in names[13]
    manifest = json.loads(CJK_MANIFEST.read_text(encoding="utf-8"))
    assert manifest["source_family"] == "Noto Sans CJK SC"
    version = manifest["source_version"]
    assert version.startswith("Version ") and f"Noto Sans CJK SC ({version})" in names[10]
    cff = font["CFF "].cff
    assert cff.fontNames == ["kvlabCJK-Regular"]
    # NOTE: Noto Sans CJK derives from Source Han Sans, Reserved Font Name "Source"
    every_name = [*names.values(), *cff.fontNames, cff.topDictIndex[0].FamilyName,
                  *(fd.FontName for fd in cff.topDictIndex[0].FDArray)]
    assert [n for n in every_name if "Source" in n] == []
    licence = (CJK_FONT.parent / "OFL.txt").read_text(encoding="utf-8")
    assert "with Reserved Font Name 'Source'" in licence and "SIL OPEN FONT LICENSE Version 1.1" \
        in licence and "5) The Font Software, modified or unmodified" in licence
    assert CJK_FONT.stat().st_size < 40_000


def test_the_subset_script_cuts_renames_and_records(tmp_path, capsys):
    """Run on a stand-in for Noto Sans CJK SC (the shipped subset under that name: CI has no CJK
    font), the script keeps exactly the chart characters and writes the manifest."""
    out = tmp_path / "out" / "cjk.otf"
    assert subset_main([str(_decoy(tmp_path)), "--out", str(out)]) == 0
    font = TTFont(out)
    assert "".join(sorted(chr(c) for c in font.getBestCmap())) == chart_characters()
    assert font["name"].getDebugName(1) == CJK_FAMILY and font["CFF "].cff.fontNames == [
        "kvlabCJK-Regular"]
    manifest = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert manifest["source_file"] == "decoy.otf" and manifest["characters"] == chart_characters()
    assert f"{len(chart_characters())} characters, from Noto Sans CJK SC" in capsys.readouterr().out
    dejavu = Path(font_manager.__file__).parent / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
    assert subset_main([str(dejavu), "--out", str(tmp_path / "x.otf")]) == 1
    assert capsys.readouterr().err == (f"kvlab.font_subset: {dejavu} has no Noto Sans CJK SC "
                                       "Regular face (it has: DejaVu Sans Book)\n")  # fmt: skip
    assert not (tmp_path / "x.otf").exists()


@pytest.fixture
def fonts_of(monkeypatch, tmp_path):
    """fonts_of(extra) replaces the font manager's list by matplotlib's own fonts (+ ``extra``)."""
    manager = font_manager.fontManager
    own = Path(font_manager.__file__).parent / "mpl-data"

    def only(*extra: Path) -> None:
        monkeypatch.setattr(manager, "ttflist", [f for f in manager.ttflist
                                                 if Path(f.fname).is_relative_to(own)])
        for path in extra:
            manager.addfont(path)  # NOTE: clears findfont's cache
        manager._findfont_cached.cache_clear()

    yield only
    monkeypatch.undo()
    manager._findfont_cached.cache_clear()


def _decoy(tmp_path: Path) -> Path:
    """The subset disguised as a system Noto Sans CJK SC: the lookup kvlab used to do
    (the first installed CJK font) would take it."""
    font = TTFont(CJK_FONT)
    for record in font["name"].names:
        if record.nameID in (1, 4, 6):
            record.string = "NotoSansCJKsc-Regular" if record.nameID == 6 else "Noto Sans CJK SC"
    font["CFF "].cff.fontNames = ["NotoSansCJKsc-Regular"]
    font.save(tmp_path / "decoy.otf")
    return tmp_path / "decoy.otf"


def test_the_chinese_curve_is_the_same_bytes_whatever_fonts_are_installed(fonts_of, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NOTE: no glyph missing, no font not found
        fonts_of()  # a machine with no font but matplotlib's own
        bare = figure_svg(hit_rate_figure(ROWS, lang="zh"))
        fonts_of(_decoy(tmp_path))  # a machine with a CJK font
        assert "Noto Sans CJK SC" in {f.name for f in font_manager.fontManager.ttflist}
        decoyed = figure_svg(hit_rate_figure(ROWS, lang="zh"))
    assert bare == decoyed
    assert _glyph_fonts(bare) == {"DejaVuSans", "kvlabCJK-Regular"}
    assert "<!-- radix，块大小 512（与 vllm，块大小 512 相同） -->" in bare


def test_english_is_untouched_by_the_chinese_font(fonts_of):
    before = figure_svg(hit_rate_figure(ROWS, lang="en"))
    assert language_rc("en") == {}
    assert language_rc("zh_CN.UTF-8") == {"font.family": ["DejaVu Sans", CJK_FAMILY]}
    assert str(CJK_FONT) in {f.fname for f in font_manager.fontManager.ttflist}
    assert figure_svg(hit_rate_figure(ROWS, lang="en")) == before
    assert _glyph_fonts(before) == {"DejaVuSans"}
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        language_rc("fr")


def test_the_default_is_the_current_language(monkeypatch):
    monkeypatch.setenv("KVLAB_LANG", "zh")  # NOTE: what a Chinese notebook's first cell sets
    zh = hit_rate_figure(ROWS).axes[0]
    assert zh.get_xlabel() == "缓存容量（token 数，对数坐标）"
    with use_language("en"):
        assert hit_rate_figure(ROWS).axes[0].get_xlabel() == "cache capacity (tokens, log scale)"
    assert hit_rate_figure(ROWS, lang="en").axes[0].get_xlabel() == \
        "cache capacity (tokens, log scale)"


def test_whatif_draws_its_chinese_title_with_the_bundled_font(tmp_path, fonts_of):
    fonts_of()
    trace, svg = tmp_path / "t.jsonl", tmp_path / "c.svg"
    trace.write_text("\n".join(LINES) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = CliRunner().invoke(main, ["--lang", "zh", "whatif", str(trace), "--capacity-tokens",
                                        "1024", "--svg", str(svg)])  # fmt: skip
    assert res.exit_code == 0, res.output
    text = svg.read_text(encoding="utf-8")
    assert "<!-- t.jsonl：2 个请求，块大小 512 -->" in text
    assert _glyph_fonts(text) == {"DejaVuSans", "kvlabCJK-Regular"}
