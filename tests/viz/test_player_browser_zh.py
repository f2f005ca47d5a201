"""The player in Chinese in a real browser: an exported page, offline, labelled, stepped, asking.

``export_html(trace, lang="zh", predict=...)`` opened from ``file://`` in headless Chromium with
every non-local request aborted (tests/viz/_browser.py): the legend, panel titles, captions,
button tooltips and events are Chinese (identifiers such as free_block_queue and popleft stay),
stepping moves the cursor, and the predict mode asks its question (Python's Chinese
``quiz_points``) and reveals its Chinese explanation. A page holding an English and a Chinese
player keeps each in its own language.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _browser import SKIP_REASON, browser_page

from kvlab.i18n import use_language
from kvlab.trace import Trace
from kvlab.viz import export_html, html_page, player_html, player_labels, quiz_points

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))

ROOT = "#kvlab-player"


def _index(page, root: str) -> int:
    return page.locator(root).evaluate("(r) => r.kvlabPlayer.model.get('index')")


def _text(page, css: str) -> str:
    return page.locator(css).inner_text()


def test_exported_chinese_page_labels_steps_and_asks(shared: Trace, tmp_path: Path) -> None:
    kinds = ("hit", "popleft")
    with use_language("zh"):
        points = quiz_points(shared, kinds)
    hit = points[0]
    assert (hit.kind, hit.ask, hit.reveal) == ("hit", 0, 3)
    n, free = len(shared), len(shared.state_at(-1).free_queue_order())
    page_path = export_html(shared, tmp_path / "zh.html", lang="zh", predict=kinds)
    with browser_page() as (page, guard):
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.set_default_timeout(10_000)
        page.goto(page_path.resolve().as_uri())
        page.locator(f"{ROOT} .kvlab-caption b").wait_for()
        assert page.title() == "kvlab 事件轨迹"
        assert _text(page, f"{ROOT} .kvlab-caption b") == f"事件 -1 / 共 {n} 个"
        legend = _text(page, f'{ROOT} [data-view="pool"] .kvlab-legend')
        for label in (
            "使用中（ref_cnt 1）",
            "共享（ref_cnt ≥ 2）",
            "空闲、已缓存：可驱逐",
            "null_block",
        ):
            assert label in legend
        assert _text(page, f'{ROOT} [data-view="pool"] .kvlab-title') == (
            f"BlockPool · {shared.initial_state.num_blocks} 个块 · 空闲队列中 {free} 个"
        )
        queue = _text(page, f'{ROOT} [data-view="free_queue"]')
        assert f"free_block_queue · {free} 个块 · popleft 从左侧取块" in queue
        assert "最先驱逐" in queue and "伪头节点" in queue and "free_blocks 追加到这里" in queue
        assert "初始状态（事件 0 之前）" in _text(page, f'{ROOT} [data-view="events"]')
        into = page.locator(f'{ROOT} button[data-move="into"]')
        assert into.get_attribute("title") == "单步进入：前进一个事件（→）"
        assert page.locator(f'{ROOT} button[data-move="play"]').inner_text() == "▶ 播放"

        into.click()  # onto event 0 (STEP)
        page.locator(f"{ROOT} .kvlab-caption b").filter(has_text=f"事件 0 / 共 {n} 个").wait_for()
        assert _index(page, ROOT) == 0
        assert "第 1 步 · #0 STEP 1" in _text(page, f'{ROOT} [data-view="events"]')
        into.click()  # would enter get_computed_blocks: asked first, in Chinese
        quiz = page.locator(f"{ROOT} .kvlab-quiz")
        quiz.wait_for(state="visible")
        assert _index(page, ROOT) == hit.ask
        assert _text(page, f"{ROOT} .kvlab-quiz-question") == f"预测： {hit.question}"
        assert hit.question.startswith("get_computed_blocks（请求 'a'）")
        assert page.locator(f"{ROOT} .kvlab-show-answer").inner_text() == "查看答案"
        into.click()  # refused until answered
        assert "请先选一个答案（按键 1–4）" in _text(page, f"{ROOT} .kvlab-quiz-feedback")
        wrong = (hit.answer + 1) % len(hit.choices)
        page.locator(f'{ROOT} .kvlab-choice[data-choice="{wrong}"]').click()
        assert _text(page, f"{ROOT} .kvlab-quiz-feedback") == (
            f"✗ 不是 {hit.choices[wrong]}。再试一次，或者查看答案。"
        )
        page.locator(f'{ROOT} .kvlab-choice[data-choice="{hit.answer}"]').click()
        page.locator(f"{ROOT} .kvlab-caption b").filter(has_text=f"事件 {hit.reveal} / ").wait_for()
        assert _text(page, f"{ROOT} .kvlab-quiz-feedback") == (
            f"✓ 答对了（但不是第一次就答对）：{hit.choices[hit.answer]}。{hit.explanation}"
        )
        assert _text(page, f"{ROOT} .kvlab-score") == (
            f"预测：已答 1 题，首次答对 0 题 · 还剩 {len(points) - 1} 题"
        )
        shown = page.locator(ROOT).inner_text()
        for english in ("free queue", "evicts first", "block table", "hash chains", "Predict",
                        "event ", "step ", "jump to", "reset quiz"):  # fmt: skip
            assert english not in shown, english
    assert errors == [] and guard.blocked == []


def test_a_page_mixing_languages_keeps_each_player_in_its_own(
    shared: Trace, tmp_path: Path
) -> None:
    body = player_html(shared, "p-en", lang="en") + player_html(shared, "p-zh", lang="zh")
    path = tmp_path / "mixed.html"
    path.write_text(html_page(body, title="two languages", lang="en"), encoding="utf-8")
    with browser_page() as (page, guard):
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.set_default_timeout(10_000)
        page.goto(path.resolve().as_uri())
        page.locator("#p-zh .kvlab-caption b").wait_for()
        for _ in range(3):  # step both, in turn
            page.locator('#p-zh button[data-move="into"]').click()
            page.locator('#p-en button[data-move="into"]').click()
        assert _index(page, "#p-zh") == _index(page, "#p-en") == 2
        assert _text(page, "#p-en .kvlab-caption b") == f"event 2 of {len(shared)}"
        assert _text(page, "#p-zh .kvlab-caption b") == f"事件 2 / 共 {len(shared)} 个"
        assert "free_block_queue" in _text(page, '#p-en [data-view="free_queue"] .kvlab-title')
        assert "popleft takes from the left" in _text(page, '#p-en [data-view="free_queue"]')
        assert "popleft 从左侧取块" in _text(page, '#p-zh [data-view="free_queue"]')
        # new labels (TracePlayer.lang changed from Python): the player is built again in them
        page.locator("#p-en").evaluate(
            "(r, labels) => r.kvlabPlayer.model.set('labels', labels)", player_labels("zh")
        )
        assert _text(page, "#p-en .kvlab-caption b") == f"事件 2 / 共 {len(shared)} 个"
        assert _index(page, "#p-en") == 2 and page.locator("#p-en .kvlab-player").count() == 1
        page.locator('#p-en button[data-move="into"]').click()
        assert _text(page, "#p-en .kvlab-caption b") == f"事件 3 / 共 {len(shared)} 个"
        assert _index(page, "#p-en") == 3 and _index(page, "#p-zh") == 2
    assert errors == [] and guard.blocked == []
