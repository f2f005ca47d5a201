"""kvlab whatif --html: one curve per language, ids that do not collide, a switch that works.

The page is opened from ``file://`` in headless Chromium with every non-local request aborted
(tests/viz/_browser.py).
"""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from kvlab.traffic import read_mooncake_lines, sweep, sweep_rows
from kvlab.traffic.report import report_html, write_report

if "_browser" not in sys.modules:  # NOTE: tests/viz's helper (tests/viz imports it by name)
    _spec = importlib.util.spec_from_file_location(
        "_browser", Path(__file__).parents[1] / "viz" / "_browser.py")
    sys.modules["_browser"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["_browser"])
_browser = sys.modules["_browser"]

LINES = [
    '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}',
    '{"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}',
    '{"timestamp": 2, "input_length": 600, "output_length": 1, "hash_ids": [0, 3]}',
]
TITLES = {"en": "three requests", "zh": "三个请求"}


def _page() -> str:
    reqs = read_mooncake_lines(LINES)
    rows = sweep_rows(sweep(reqs, ["vllm", "belady"], [1024, 4096], [512]))
    return report_html(reqs, rows, [], title=TITLES, block_size=512)


def test_each_language_has_its_curve_and_every_id_once():
    page = _page()
    en, zh = page.split('<div class="zh" lang="zh">')
    assert "<h1>three requests</h1>" in en and "<h1>三个请求</h1>" in zh
    assert en.count("<svg") == zh.count("<svg") == 1
    # NOTE: labels stay SVG text, so the browser draws the Chinese ones with its own fonts
    assert ">cache capacity (tokens, log scale)</text>" in en
    assert ">缓存容量（token 数，对数坐标）</text>" in zh and ">无限大缓存，块大小 512</text>" in zh
    assert ">vllm，块大小 512</text>" in zh  # NOTE: belady equals vLLM here, and says so
    assert ">belady，块大小 512（与 vllm，块大小 512 相同）</text>" in zh
    # NOTE: measured with the bundled font, which the browser lacks: it falls back to sans-serif
    assert "font-family: 'DejaVu Sans', 'kvlab CJK', sans-serif" in zh
    assert "kvlab CJK" not in en
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)) and {i[:3] for i in ids} == {"en-", "zh-"}
    refs = re.findall(r'(?:url\(#|href="#)([^")]+)', page)
    assert refs and set(refs) <= set(ids)
    for part, lang in ((en, "en"), (zh, "zh")):  # NOTE: each curve refers to its own ids
        assert all(r.startswith(lang) for r in re.findall(r'(?:url\(#|href="#)([^")]+)', part))


@pytest.mark.skipif(_browser.SKIP_REASON is not None, reason=str(_browser.SKIP_REASON))
def test_the_switch_shows_one_language_at_a_time_offline(tmp_path):
    path = tmp_path / "report.html"
    reqs = read_mooncake_lines(LINES)
    rows = sweep_rows(sweep(reqs, ["vllm"], [1024, 4096], [512]))
    write_report(path, reqs, rows, [], title=TITLES, block_size=512)
    with _browser.browser_page() as (page, guard):
        page.goto(path.as_uri())
        shown = "() => [...document.querySelectorAll('body > div')].filter(d => d.offsetHeight)"
        assert page.evaluate(shown + ".map(d => d.lang)") == ["en"]
        page.get_by_role("button", name="中文").click()
        assert page.evaluate(shown + ".map(d => d.lang)") == ["zh"]
        box = page.locator("div.zh svg").bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 200
        assert page.locator("div.zh h2").first.inner_text() == "各容量下的命中率"
        page.get_by_role("button", name="English").click()
        assert page.evaluate(shown + ".map(d => d.lang)") == ["en"]
    assert guard.blocked == []
