"""The playground in a real browser: kvlab.core in Pyodide gives CPython's events, offline.

Headless Chromium (tests/viz/_browser.py) opens the folder ``kvlab playground`` writes, served
on 127.0.0.1, with every other request aborted and recorded. One page runs the presets and 16
random scenarios through the page's own Run path and compares each with the same scenario run
by kvlab in CPython: the player's input (``encode_trace``: every event, block id, payload and
the 4-byte hash prefixes), the full block hashes, the predict questions, and the free-queue
order the page's replayer shows after every call. Then the editor: bad scenarios show
CPython's own message and the page keeps working; a share link reopens the same scenario and
trace; ``?lang=zh`` is Chinese; ``file://`` says to serve the folder.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _scenarios import random_scenario

from kvlab.playground import PRESETS, ScenarioError, parse_scenario, run_scenario, word_ids
from kvlab.trace import EventKind, Recorder
from kvlab.viz.encode import encode_trace
from kvlab.viz.predict import quiz_points

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "viz"))
from _browser import SKIP_REASON, browser_page, click_move, read_player, wait_index  # noqa: E402

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))

LOAD_MS = 90_000  # Pyodide's first start on a loaded 2-core machine took up to 10 s


def _valid_random(count: int) -> list[dict]:
    """The first ``count`` random scenarios that CPython runs without an error."""
    out, seed = [], 0
    while len(out) < count:
        data = random_scenario(1000 + seed)
        seed += 1
        try:
            run_scenario(parse_scenario(data))
        except (ValueError, TypeError):
            continue
        out.append(data)
    return out


def _cpython(data: dict):
    rec = Recorder()
    run_scenario(parse_scenario(data), rec)
    return rec.trace()


def _json(value):
    return json.loads(json.dumps(value, sort_keys=True))


_QUEUES = """(data) => {
  const T = window.kvlabPlayer.loadTrace(data), out = {};
  const R = new window.kvlabPlayer.Replayer(T, 64);
  for (let i = 0; i < T.n; i++) if (T.c.kind[i] === 18) out[i] = R.stateAt(i).queue().head;
  return out;
}"""


def _open(page, url: str) -> None:
    page.goto(url)
    page.wait_for_function(
        "() => window.kvlabPlayground && window.kvlabPlayground.last", timeout=LOAD_MS
    )


def _run_on_page(page, data: dict) -> dict:
    return page.evaluate("(s) => window.kvlabPlayground.run(s)", data)


def test_pyodide_runs_the_same_events_as_cpython_offline(served: str) -> None:
    cases = [(name, p.scenario) for name, p in PRESETS.items()]
    cases += [(f"random-{i}", d) for i, d in enumerate(_valid_random(16))]
    assert len(cases) >= 20
    with browser_page((served,)) as (page, guard):
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        _open(page, served + "index.html")
        kinds_seen: set[int] = set()
        for name, data in cases:
            answer = _run_on_page(page, data)
            assert answer["ok"], (name, answer.get("error"), answer.get("detail"))
            trace = _cpython(data)
            got = answer["player"]
            assert _json(got["trace_data"]) == _json(encode_trace(trace)), name
            assert answer["block_hashes"] == [
                trace.tables.hash_bytes(h).hex() for h in range(trace.tables.num_hashes)
            ], name
            kinds = data.get("predict") or []
            assert _json(got["quiz"]) == _json([p.to_dict() for p in quiz_points(trace, kinds)])
            queues = page.evaluate(_QUEUES, got["trace_data"])
            ends = [int(i) for i in trace.filter(EventKind.CALL_END)]
            assert {int(k): v for k, v in queues.items()} == {
                i: trace.state_at(i).free_queue_order() for i in ends
            }, name
            kinds_seen.update(int(k) for k in trace.cols.kind)
        assert {
            EventKind.FIXED_POINT_ITERATED,
            EventKind.REQ_BLOCKS_NULLED,
            EventKind.BLOCK_REMOVED,
            EventKind.STEP,
        } <= kinds_seen
        assert not errors
        assert guard.blocked == []
        assert requested and all(u.startswith(served) for u in requested), requested[:5]


ROOT = "#kvlab-player"


def _ask_and_answer(page, point: dict) -> None:
    """Step over calls until the player asks ``point``; a wrong pick is refused, the right one
    reveals the decision and the explanation."""
    quiz_box = page.locator(f"{ROOT} .kvlab-quiz")
    question = f"Predict: {point['question']}"  # a revealed one reads "Revealed: ..."

    def asked() -> bool:
        return quiz_box.is_visible() and quiz_box.inner_text().startswith(question)

    for _ in range(300):
        if asked():
            break
        click_move(page, ROOT, "over")
    assert asked(), point
    assert read_player(page, ROOT).index == point["ask"]
    wrong = (point["answer"] + 1) % len(point["choices"])
    page.locator(f'{ROOT} .kvlab-choice[data-choice="{wrong}"]').click()
    assert f"✗ Not {point['choices'][wrong]}" in quiz_box.inner_text()
    assert read_player(page, ROOT).index == point["ask"]
    page.locator(f'{ROOT} .kvlab-choice[data-choice="{point["answer"]}"]').click()
    wait_index(page, ROOT, point["reveal"])
    assert point["explanation"] in quiz_box.inner_text()


def test_the_page_asks_window_fixed_point_and_preempt_questions(served: str) -> None:
    """The presets of notebooks 6, 7 and 8 turn on the window, fixed_point and preempt kinds:
    the page computes CPython's questions in Pyodide and its player asks and reveals them."""
    with browser_page((served,)) as (page, guard):
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        for name, kind in (("nb06", "window"), ("nb07", "fixed_point"), ("nb08", "preempt")):
            _open(page, f"{served}index.html?preset={name}")
            quiz = page.evaluate("() => window.kvlabPlayground.last.answer.player.quiz")
            trace = _cpython(PRESETS[name].scenario)
            assert _json(quiz) == _json([p.to_dict() for p in quiz_points(trace, [kind])])
            assert quiz and {q["kind"] for q in quiz} == {kind}, name
            box = page.locator(f'.pg-check input[value="{kind}"]')
            assert box.is_checked()  # the editor shows the preset's kinds
            _ask_and_answer(page, quiz[0])
            if len(quiz) > 1:
                _ask_and_answer(page, quiz[1])  # the next one is asked after the first
        assert errors == [] and guard.blocked == []


BAD = {
    "a token list with text in it": {"requests": [{"id": "a", "prompt": "1 2 hello 4"}]},
    "block_size 0": {"block_size": 0},
    "a window larger than max_model_len": {"layers": [500], "max_model_len": 128},
    "a pool of 1 block": {"num_gpu_blocks": 1},
    "a huge request list": {"requests": [{"id": f"r{i}", "prompt": "1 2 3"} for i in range(500)]},
}


def _cpython_error(data: dict) -> str:
    try:
        run_scenario(parse_scenario(data))
    except (ScenarioError, ValueError, TypeError) as exc:
        return str(exc)
    raise AssertionError(f"CPython ran {data}")


def test_bad_scenarios_show_cpythons_message_and_the_page_stays_usable(served: str) -> None:
    base = {"requests": [{"id": "a", "prompt": "1 2 3 4 5"}], "driver": "scheduler"}
    with browser_page((served,)) as (page, guard):
        _open(page, served + "index.html")
        run = page.locator(".pg-run")
        for what, change in BAD.items():
            message = _cpython_error({**base, **change})
            page.evaluate("(s) => window.kvlabPlayground.fill(s, '')", {**base, **change})
            run.click()
            box = page.locator(".pg-error")
            box.wait_for(state="visible")
            assert message in box.inner_text(), (what, message, box.inner_text())
            assert "Traceback" not in box.inner_text()  # a plain sentence, no traceback
            assert page.locator("#kvlab-player .kvlab-player").count() == 0
        assert "prompt_token_ids[2] is str 'hello'" in _cpython_error(
            {**base, **BAD["a token list with text in it"]}
        )
        # The page still works: fix the scenario and run it from the editor.
        page.evaluate("(s) => window.kvlabPlayground.fill(s, '')", base)
        run.click()
        page.locator("#kvlab-player .kvlab-caption").wait_for()
        assert page.locator(".pg-error").is_hidden()
        answer = page.evaluate("() => window.kvlabPlayground.last.answer")
        assert answer["ok"] and answer["num_events"] == len(_cpython(base))
        # The word preview shows the ids Python will use.
        page.evaluate(
            "() => { const s = window.kvlabPlayground.scenario(); s.text = 'words';"
            " s.requests[0].prompt = '今天 the cat, sat.'; window.kvlabPlayground.fill(s, ''); }"
        )
        preview = page.locator(".pg-preview").first.inner_text()
        assert preview.endswith(" ".join(map(str, word_ids("今天 the cat, sat."))))
        assert guard.blocked == []


def test_share_link_round_trips(served: str) -> None:
    data = {**PRESETS["nb07"].scenario, "calls": "prefill a\nfree a\nevict 14\nlookup b"}
    with browser_page((served,)) as (page, guard):
        _open(page, served + "index.html?preset=nb03")
        assert (
            page.evaluate("() => window.kvlabPlayground.last.scenario")["calls"]
            == PRESETS["nb03"].scenario["calls"]
        )
        page.evaluate("(s) => window.kvlabPlayground.fill(s, '')", data)
        page.locator(".pg-run").click()
        page.wait_for_function(
            "() => window.kvlabPlayground.last.scenario.calls.includes('evict 14')"
        )
        first = page.evaluate("() => window.kvlabPlayground.last")
        page.get_by_role("button", name="Share").click()
        link = page.locator(".pg-link").input_value()
        assert link.startswith(served + "index.html#s=")
        page2 = page.context.new_page()  # a fresh page (same network guard) opens the link
        _open(page2, link)
        again = page2.evaluate("() => window.kvlabPlayground.last")
        assert again["scenario"] == first["scenario"]
        assert _json(again["answer"]["player"]["trace_data"]) == _json(
            first["answer"]["player"]["trace_data"]
        )
        assert _json(again["answer"]["player"]["trace_data"]) == _json(
            encode_trace(_cpython(again["scenario"]))
        )
        assert guard.blocked == []


def test_chinese_page(served: str) -> None:
    with browser_page((served,)) as (page, guard):
        _open(page, served + "index.html?lang=zh&preset=nb03")
        assert page.locator("html").get_attribute("lang") == "zh-Hans"
        assert page.locator(".pg-run").inner_text() == "▶ 运行"
        legends = page.locator("legend").all_inner_texts()
        assert "块池" in legends and "缓存设计" in legends and "请求" in legends
        preset = page.locator("select.pg-select").first
        assert "笔记本 3" in preset.evaluate("s => s.options[s.selectedIndex].text")
        player = page.locator("#kvlab-player")
        assert "空闲" in player.inner_text()  # the player's labels (free_block_queue panel ...)
        quiz = page.evaluate("() => window.kvlabPlayground.last.answer.player.quiz")
        assert quiz and all("块" in q["question"] for q in quiz)
        page.evaluate("(s) => window.kvlabPlayground.fill(s, '')", {"block_size": 0})
        page.locator(".pg-run").click()
        box = page.locator(".pg-error")
        box.wait_for(state="visible")
        assert (
            "这个场景无法运行" in box.inner_text()
            and "block_size must be a positive int" in box.inner_text()
        )
        assert guard.blocked == []


def test_file_url_says_to_serve_the_folder(built) -> None:
    with browser_page() as (page, guard):
        page.goto((built.out / "index.html").resolve().as_uri())
        box = page.locator(".pg-error")
        box.wait_for(state="visible")
        assert "kvlab playground --serve" in box.inner_text()
        assert page.locator(".pg-run").is_disabled()
        assert guard.blocked == []
