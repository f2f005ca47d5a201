"""Predict mode in a real browser: an exported page, offline, asks, refuses, reveals, scores.

``export_html(trace, predict=...)`` opened from ``file://`` in headless Chromium with every
non-local request aborted (tests/viz/_browser.py). Stepping forward stops right before a
decision and asks (the events list hides what comes next); a wrong pick is marked and the
cursor stays; the right pick moves to the decision and shows ``quiz_points``' explanation;
keys 1-4 answer; stepping back and forward again does not ask an answered question.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _browser import SKIP_REASON, browser_page, click_move, read_player, wait_index

from kvlab.trace import EventKind, Trace
from kvlab.viz import export_html, quiz_points

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))

ROOT = "#kvlab-player"


def _quiz_text(page) -> str:
    return page.locator(f"{ROOT} .kvlab-quiz").inner_text()


def test_exported_page_asks_then_reveals_offline(shared: Trace, tmp_path: Path) -> None:
    kinds = ("popleft", "evict", "hit")
    points = quiz_points(shared, kinds)
    hit, popleft = points[0], points[1]  # get_computed_blocks of 'a', then its popleft_n(3)
    assert (hit.kind, hit.ask, hit.reveal, popleft.kind, popleft.ask) == ("hit", 0, 3, "popleft", 5)
    # between them: allocate_slots' CALL_BEGIN (4), then req_to_blocks['a'] created empty (5)
    assert [shared[i].kind for i in (4, 5)] == [EventKind.CALL_BEGIN, EventKind.REQ_BLOCKS_ADDED]
    page_path = export_html(shared, tmp_path / "predict.html", predict=kinds)
    with browser_page() as (page, guard):
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.set_default_timeout(10_000)
        page.goto(page_path.resolve().as_uri())
        wait_index(page, ROOT, -1)
        quiz_box = page.locator(f"{ROOT} .kvlab-quiz")
        click_move(page, ROOT, "into")  # onto event 0 (STEP): nothing decided yet
        wait_index(page, ROOT, 0)
        assert quiz_box.is_hidden()
        click_move(page, ROOT, "into")  # would enter get_computed_blocks: asked first
        quiz_box.wait_for(state="visible")
        assert read_player(page, ROOT).index == hit.ask
        assert hit.question in _quiz_text(page)
        listed = page.locator(f'{ROOT} [data-view="events"] .kvlab-ev').evaluate_all(
            "els => els.map((e) => Number(e.dataset.index))"
        )
        assert listed[-1] == hit.ask  # the events list stops at the cursor: no spoiler
        click_move(page, ROOT, "over")  # refused until answered
        assert read_player(page, ROOT).index == hit.ask
        assert "Pick an answer first" in _quiz_text(page)

        wrong = (hit.answer + 1) % len(hit.choices)
        page.locator(f'{ROOT} .kvlab-choice[data-choice="{wrong}"]').click()
        assert f"✗ Not {hit.choices[wrong]}" in _quiz_text(page)
        assert "kvlab-wrong" in page.locator(
            f'{ROOT} .kvlab-choice[data-choice="{wrong}"]'
        ).get_attribute("class")
        assert read_player(page, ROOT).index == hit.ask
        page.locator(f'{ROOT} .kvlab-choice[data-choice="{hit.answer}"]').click()
        wait_index(page, ROOT, hit.reveal)  # the decision is shown
        text = _quiz_text(page)
        assert (
            f"✓ Right (not at the first try): {hit.choices[hit.answer]}. {hit.explanation}" in text
        )
        score = page.locator(f"{ROOT} .kvlab-score")
        assert score.inner_text() == f"predict: 0 right of 1 answered · {len(points) - 1} to go"

        page.keyboard.press("ArrowRight")  # keys still step after the click: onto the CALL_BEGIN
        wait_index(page, ROOT, popleft.ask - 1)
        page.keyboard.press("ArrowRight")  # onto the empty REQ_BLOCKS_ADDED: nothing asked yet
        wait_index(page, ROOT, popleft.ask)
        assert quiz_box.is_hidden()
        page.keyboard.press("ArrowRight")  # would pop: asked
        quiz_box.wait_for(state="visible")
        assert popleft.question in _quiz_text(page)
        page.keyboard.press(str(popleft.answer + 1))
        wait_index(page, ROOT, popleft.reveal)
        assert popleft.explanation in _quiz_text(page)
        assert score.inner_text() == f"predict: 1 right of 2 answered · {len(points) - 2} to go"
        drawn = read_player(page, ROOT)
        assert (
            drawn.free_queue
            == shared.state_at(popleft.reveal).free_queue_order()
            == [4, 5, 6, 7, 8, 9]
        )

        page.keyboard.press("Home")  # back to the start: answered questions stay answered
        wait_index(page, ROOT, -1)
        for i in range(popleft.reveal + 1):
            page.keyboard.press("ArrowRight")
            wait_index(page, ROOT, i)
            assert quiz_box.is_hidden(), i
        page.locator(f"{ROOT} button", has_text="reset quiz").click()
        assert score.inner_text() == f"predict: 0 right of 0 answered · {len(points)} to go"
        page.keyboard.press("Home")
        click_move(page, ROOT, "over")  # event 0
        click_move(page, ROOT, "over")  # asked again after the reset
        quiz_box.wait_for(state="visible")
        assert read_player(page, ROOT).index == hit.ask and hit.question in _quiz_text(page)
    assert errors == [] and guard.blocked == []
