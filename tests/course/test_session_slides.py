"""``kvlab slides --session N``: one curated deck per session, notes on every slide, offline."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "viz"))
from _browser import SKIP_REASON, browser_page  # noqa: E402

from kvlab.cli import main  # noqa: E402
from kvlab.course.sessions import SESSIONS  # noqa: E402
from kvlab.slides_session import EXCERPTS, ZH, export_session_slides, session_slides  # noqa: E402


@pytest.fixture(scope="module")
def decks(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("decks")
    for s in SESSIONS:
        for lang in ("en", "zh"):
            export_session_slides(s.number, out, lang)
    return out


def test_each_deck_follows_its_session_with_notes_everywhere(decks: Path) -> None:
    for s in SESSIONS:
        slides = session_slides(s.number, decks, "en")
        assert len(slides) == len(s.timetable) + 2  # title, the slots (pre-test ... exit), labs
        assert all(slide.notes.strip() for slide in slides)
        page = (decks / f"session{s.number}.slides.html").read_text(encoding="utf-8")
        assert page.count('<aside class="notes">') == len(slides)
        for item in s.pretest + s.exit_quiz:
            assert f"<code>{item}</code>" in page
        zh = (decks / f"session{s.number}.zh.slides.html").read_text(encoding="utf-8")
        assert f"第 {s.number} 次课" in zh and all(f"<code>{item}</code>" in zh for item in s.exit_quiz)
        loaded = re.findall(r"<(?:script|link|img|iframe)[^>]*(?:src|href)=[\"']([^\"']*)", page)
        assert loaded and all(not re.match(r"(https?:)?//", url) for url in loaded), loaded
        for url in loaded:
            assert (decks / url).is_file(), url
    assert {f"q:{i}" for s in SESSIONS for i in s.pretest + s.exit_quiz} <= set(ZH)


def test_the_code_excerpts_run() -> None:
    """The slides' code is true: each excerpt runs in the setting its slide describes."""
    from kvlab.core import Request, SamplingParams, get_request_block_hasher, sha256
    from kvlab.core.sched import SchedulerConfig
    from kvlab.course.lab_setup import full_attention_manager
    from kvlab.kv_transfer import ConnectorScheduler, CPUOffloadingConnector

    manager = full_attention_manager(16, 4, 128)
    hasher = get_request_block_hasher(4, sha256)

    def make(rid: str, prompt: list[int]) -> Request:
        return Request(rid, prompt, SamplingParams(max_tokens=4), None, block_hasher=hasher)

    a, b, c = make("a", list(range(12))), make("b", list(range(12)) + [1]), make("c", list(range(500, 512)))
    exec(EXCERPTS["lookup"], {"manager": manager, "a": a, "b": b})
    hit_blocks, num_hit = manager.get_computed_blocks(c)
    exec(EXCERPTS["pd_load"], {"manager": manager, "c": c, "hit_blocks": hit_blocks, "num_hit": num_hit})
    config = SchedulerConfig(max_model_len=128)
    exec(EXCERPTS["offloading"], {"ConnectorScheduler": ConnectorScheduler, "CPUOffloadingConnector":
                                  CPUOffloadingConnector, "manager": full_attention_manager(16, 4, 128),
                                  "config": config})  # fmt: skip


def test_the_command_builds_a_session_deck_and_refuses_both_or_neither(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["slides", "--session", "2", "--lang", "zh", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert f"已写出 {tmp_path / 'session2.zh.slides.html'}（" in result.output  # --lang zh: in Chinese
    for args in (["slides"], ["slides", "3", "--session", "1"]):
        bad = CliRunner().invoke(main, args)
        assert bad.exit_code == 2 and "give a notebook NUMBER (e.g. 03) or --session N (1-3), not both" in bad.output
    assert CliRunner().invoke(main, ["slides", "--session", "4"]).exit_code == 2


@pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
@pytest.mark.parametrize(("number", "lang"), [(1, "en"), (2, "zh"), (3, "en")])
def test_decks_run_in_chromium_offline_with_notes(decks: Path, number: int, lang: str) -> None:
    name = f"session{number}.slides.html" if lang == "en" else f"session{number}.zh.slides.html"
    with browser_page() as (page, guard):
        page.goto((decks / name).as_uri())
        page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=20_000)
        total = page.evaluate("Reveal.getTotalSlides()")
        assert total == len(session_slides(number, decks, lang))
        notes = page.evaluate("Reveal.getSlides().map((s) => Reveal.getSlideNotes(s) || '')")
        assert len(notes) == total and all(n.strip() for n in notes)
        page.keyboard.press("ArrowRight")
        page.wait_for_function("Reveal.getIndices().h === 1")
        page.wait_for_timeout(500)  # the players' iframes load
        assert guard.blocked == []
