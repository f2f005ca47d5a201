"""``kvlab slides NN``: offline reveal.js slides, opened in Chromium with the network blocked."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("nbconvert")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "viz"))
from _browser import SKIP_REASON, browser_page  # noqa: E402

from kvlab.cli import main  # noqa: E402
from kvlab.slides import REVEAL_DIR, export_slides, find_notebook  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _read(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)


def _num_headed_cells(path: Path) -> int:
    nb = _read(path)
    return sum(c.cell_type == "markdown" and re.match(r"#{1,2} ", c.source) is not None
               for c in nb.cells)  # fmt: skip


def test_the_command_writes_a_page_that_loads_nothing_remote(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["slides", "3", "--out", str(tmp_path),
                                       "--notebooks", str(NOTEBOOKS)])  # fmt: skip
    assert result.exit_code == 0, result.output
    page = tmp_path / "03_the_lru_free_queue.slides.html"
    assert f"wrote {page}" in result.output
    html = page.read_text()
    assert "<title>3. The LRU free queue slides</title>" in html
    loaded = re.findall(r"<(?:script|link)[^>]*(?:src|href)=[\"']([^\"']*)", html)
    assert loaded and all(url.startswith("reveal.js/") for url in loaded), loaded
    for url in loaded:
        assert (tmp_path / url).is_file(), url
    assert not re.search(r"(?:from|src=|href=)\s*[\"'](?:https?:)?//", html)
    assert (tmp_path / "reveal.js" / "dist" / "reveal.js").read_bytes() == (
        REVEAL_DIR / "dist" / "reveal.js").read_bytes()


def test_bad_numbers_are_refused_with_what_exists() -> None:
    with pytest.raises(FileNotFoundError, match=r"no notebook 99 in .*; it holds 01, 02"):
        find_notebook("99", NOTEBOOKS)
    with pytest.raises(ValueError, match="1-2 digits"):
        find_notebook("3a", NOTEBOOKS)
    result = CliRunner().invoke(main, ["slides", "99", "--notebooks", str(NOTEBOOKS)])
    assert result.exit_code == 2 and "no notebook 99" in result.output
    assert "Error" not in result.output.replace("Error: ", "")  # no exception class name


def test_the_chinese_notebook_becomes_chinese_slides(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["slides", "3", "--lang", "zh", "--out", str(tmp_path),
                                       "--notebooks", str(NOTEBOOKS)])  # fmt: skip
    assert result.exit_code == 0, result.output
    html = (tmp_path / "03_the_lru_free_queue.slides.html").read_text(encoding="utf-8")
    zh_title = _read(NOTEBOOKS / "zh" / "03_the_lru_free_queue.ipynb").cells[0].source.splitlines()[0]
    assert re.search(r"[\u4e00-\u9fff]", zh_title)
    assert f"<title>{zh_title.lstrip('# ')} slides</title>" in html
    result = CliRunner().invoke(main, ["--lang", "zh", "slides", "3", "--out", str(tmp_path / "g"),
                                       "--notebooks", str(NOTEBOOKS)])  # fmt: skip
    assert result.exit_code == 0 and "贪" not in result.output, result.output
    assert (tmp_path / "g" / "03_the_lru_free_queue.slides.html").read_text(encoding="utf-8") == html
    bad = CliRunner().invoke(main, ["slides", "3", "--lang", "fr", "--notebooks", str(NOTEBOOKS)])
    assert bad.exit_code == 2 and "en, zh" in bad.output


@pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
def test_slides_run_in_chromium_offline(tmp_path: Path) -> None:
    notebook = find_notebook("12", NOTEBOOKS)
    page_path = export_slides(notebook, tmp_path)
    with browser_page() as (page, guard):
        page.goto(page_path.as_uri())
        page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=20_000)
        assert page.evaluate("Reveal.getHorizontalSlides().length") == _num_headed_cells(notebook)
        assert page.evaluate("Reveal.getTotalSlides()") == len(_read(notebook).cells)
        assert page.evaluate("Reveal.getIndices().h") == 0
        page.keyboard.press("ArrowRight")
        page.wait_for_function("Reveal.getIndices().h === 1")
        title = page.evaluate("Reveal.getCurrentSlide().querySelector('h2').textContent")
        assert title.startswith('1. "A preempted request')
        font = page.evaluate("getComputedStyle(document.querySelector('.reveal')).fontFamily")
        assert "Source Sans Pro" in font  # the vendored theme loaded
        assert guard.blocked == []
