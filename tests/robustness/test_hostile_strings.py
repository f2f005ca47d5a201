"""Strings from a stranger's trace are shown as text on every surface: terminal views, the CLI,
event lines and explanations, the exported HTML player (in Chromium), kvlab compare's table and
side-by-side player, notebook outputs, the site's pages (nbconvert, as mkdocs-jupyter renders
them) and slides. The trace's request ids,
spec name and config try HTML/JS injection, ANSI/OSC escapes, bidi overrides, a lone surrogate
and a 1 MB id (tests/robustness/_hostile.py)."""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from _hostile import HOSTILE_IDS, assert_no_raw_controls, hostile_trace
from click.testing import CliRunner

from kvlab.trace import explain

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "viz"))
from _browser import SKIP_REASON, browser_page  # noqa: E402


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory):
    return hostile_trace(tmp_path_factory.mktemp("hostile"))


def _indexes(trace) -> list[int]:
    """Every allocate_slots begin and the event after it (each hostile request's own moment)."""
    begins = [c.begin for c in trace.calls("allocate_slots")]
    return sorted({i for b in begins for i in (b, min(b + 3, len(trace) - 1))} | {len(trace) - 1})


def test_terminal_views_event_lines_and_explanations(stranger) -> None:
    from kvlab import viz
    from kvlab.viz.terminal import to_text

    _, trace = stranger
    texts = [str(trace), *(str(trace[i]) for i in range(len(trace))),
             *(str(c) for c in trace.calls())]  # fmt: skip
    for i in _indexes(trace):
        for render in (viz.render_pool_grid, viz.render_free_queue, viz.render_block_table,
                       viz.render_events, viz.render_allocate_slots, viz.render_state):  # fmt: skip
            texts.append(to_text(render(trace, i)))
    texts += [str(explain(trace, c)) for c in trace.calls("get_computed_blocks")]
    out = "\n".join(texts)
    assert_no_raw_controls(out, "terminal views")
    assert "\\x1b[2J\\x1b[31mred" in out and "\\u202eexe.txt" in out
    assert "… (1000000 characters)" in out
    out.encode("utf-8")  # NOTE: a raw lone surrogate would make every terminal write fail
    assert max(len(line) for line in out.splitlines()) < 1000


def test_cli_trace_show_and_info(stranger) -> None:
    from kvlab.cli import main

    path, trace = stranger
    runner = CliRunner()
    outs = []
    for args in (["trace", "info", str(path)],
                 *(["trace", "show", str(path), "--event", str(i)] for i in _indexes(trace)),
                 ["trace", "show", str(path), "--request", "nobody"]):  # fmt: skip
        result = runner.invoke(main, args, env={"COLUMNS": "120"})
        assert result.exception is None or isinstance(result.exception, SystemExit), args
        outs.append(result.output)
    out = "\n".join(outs)
    assert_no_raw_controls(out, "kvlab trace show / info")
    assert "\\x1b[2J" in out and "\\u202e" in out and "(1000000 characters)" in out
    assert "no request 'nobody' in this trace; it holds:" in out


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))


def _html_tags(html: str) -> list[tuple[str, dict]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def _assert_no_injected_markup(html: str, where: str) -> None:
    tags = _html_tags(html)
    handlers = [(t, a) for t, a in tags if any(k.startswith("on") for k in a)]
    assert not handlers, f"{where}: an element with an event handler: {handlers[:2]}"
    assert not [t for t, _ in tags if t == "img"], f"{where}: an injected <img>"
    assert "\x1b" not in html and "\u202e" not in html, f"{where}: raw controls"


def test_exported_player_page_parses_as_the_plain_page(stranger, tmp_path) -> None:
    from kvlab.viz import export_html

    _, trace = stranger
    title = HOSTILE_IDS[0] + HOSTILE_IDS[2]
    page = export_html(trace, tmp_path / "p.html", title=title, description=HOSTILE_IDS[1])
    html = page.read_text(encoding="utf-8")
    _assert_no_injected_markup(html, "exported page")
    scripts = [a for t, a in _html_tags(html) if t == "script"]
    assert len(scripts) == 3 and sum(a.get("type") == "application/json" for a in scripts) == 1


@pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
def test_exported_player_in_chromium_shows_the_ids_as_text(stranger, tmp_path) -> None:
    from kvlab.viz import export_html

    _, trace = stranger
    call = trace.calls("allocate_slots")[2]  # the request with the ANSI id
    page_path = export_html(trace, tmp_path / "p.html", index=call.begin + 2,
                            title=HOSTILE_IDS[0], requests=list(trace.tables.requests))  # fmt: skip
    dialogs, errors = [], []
    with browser_page() as (page, _guard):
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.as_uri())
        page.wait_for_selector("#kvlab-player .kvlab-caption")
        text = page.inner_text("body")
        injected = page.evaluate("document.querySelectorAll('img, script:not([type])').length")
    assert dialogs == [] and errors == []
    assert injected == 2  # NOTE: the player's own two scripts, nothing else
    assert_no_raw_controls(text, "the player in Chromium")
    assert "CALL_BEGIN req=\\x1b[2J\\x1b[31mred" in text and "… (1000000 characters)" in text
    assert "<script>alert('id')</script>" in text  # the id, as text


def _notebook(trace) -> dict:
    """A notebook as a course notebook stores it: a text output of a terminal view, the
    player widget's view and state, an event line."""
    from kvlab.viz import TracePlayer
    from kvlab.viz.terminal import to_text

    player = TracePlayer(trace)
    bundle = player._repr_mimebundle_()[0] if isinstance(player._repr_mimebundle_(), tuple) \
        else player._repr_mimebundle_()  # fmt: skip
    state = {player.model_id: {"model_name": player._model_name,
                               "model_module": player._model_module,
                               "model_module_version": player._model_module_version,
                               "state": json.loads(json.dumps(player.get_state(), default=str))}}
    i = trace.calls("allocate_slots")[2].begin
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": "# A stranger's trace"},
        {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": "print(view)",
         "outputs": [{"output_type": "stream", "name": "stdout",
                      "text": to_text(__import__("kvlab").viz.render_state(trace, i))}]},
        {"cell_type": "code", "metadata": {}, "execution_count": 2, "source": "trace[i]",
         "outputs": [{"output_type": "execute_result", "execution_count": 2, "metadata": {},
                      "data": {"text/plain": str(trace[i])}}]},
        {"cell_type": "code", "metadata": {}, "execution_count": 3, "source": "player",
         "outputs": [{"output_type": "display_data", "metadata": {},
                      "data": {k: v for k, v in bundle.items() if k != "text/html"}}]},
    ]  # fmt: skip
    for k, cell in enumerate(cells):
        cell["id"] = f"cell-{k}"  # nbformat 4.5 cells carry an id
    meta = {"widgets": {"application/vnd.jupyter.widget-state+json": {
        "version_major": 2, "version_minor": 0, "state": state}}}
    return {"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}


def test_a_header_with_a_lone_surrogate_is_refused(tmp_path) -> None:
    """A lone surrogate (JSON "\\ud800") is not text: no terminal, notebook or page can write it."""
    import zipfile

    from kvlab.trace import TraceFormatError, load_trace

    path, _ = hostile_trace(tmp_path)
    with zipfile.ZipFile(path) as zf:
        entries = {n: zf.read(n) for n in zf.namelist()}
    entries["header.json"] = entries["header.json"].replace(b'"<script>', b'"\\ud800<script>', 1)
    bad = tmp_path / "surrogate.kvtrace"
    with zipfile.ZipFile(bad, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    with pytest.raises(TraceFormatError, match=r"not valid Unicode .*no lone surrogates"):
        load_trace(bad)


def test_notebook_outputs_site_pages_and_slides(stranger, tmp_path) -> None:
    import nbformat
    from nbconvert import HTMLExporter

    from kvlab.slides import export_slides

    _, trace = stranger
    nb = _notebook(trace)
    outputs = json.dumps([c.get("outputs") for c in nb["cells"]], ensure_ascii=False)
    assert "\\x1b[2J" in outputs.replace("\\\\", "\\")  # the escape, shown as text
    for cell in nb["cells"][1:3]:
        text = cell["outputs"][0].get("text") or cell["outputs"][0]["data"]["text/plain"]
        assert_no_raw_controls(text, "notebook text output")
    path = tmp_path / "stranger.ipynb"
    nbformat.write(nbformat.from_dict(nb), str(path))
    site, _ = HTMLExporter(template_name="lab").from_filename(str(path))  # mkdocs-jupyter's
    _assert_no_injected_markup(re.sub(r'<script type="application/vnd\.jupyter\.widget-state'
                                      r'\+json">.*?</script>', "", site, flags=re.S), "site page")
    slides = export_slides(path, tmp_path / "slides").read_text(encoding="utf-8")
    _assert_no_injected_markup(slides, "slides")


def test_compare_player_and_table_from_a_strangers_workload(tmp_path) -> None:
    """kvlab compare's per-request table and its side-by-side player (ComparePlayer,
    export_compare_html: the session slides) over a workload JSONL of the hostile ids."""
    from kvlab.compare import compare, from_jsonl
    from kvlab.viz.compare_player import compare_frames, export_compare_html

    prefix = list(range(1, 25))
    path = tmp_path / "stranger.jsonl"
    path.write_text("".join(json.dumps({"request_id": rid, "prompt_token_ids": [*prefix, 100 + i],
                                        "max_tokens": 2, "arrival_step": i}) + "\n"
                            for i, rid in enumerate(HOSTILE_IDS)))  # fmt: skip
    c = compare(from_jsonl(path), pool_tokens=64, block_size=4, policies=("vllm", "radix"),
                record=True)  # fmt: skip
    frames = compare_frames(c)
    notes = [n for f in frames for n in f["notes"]]
    for f in frames:
        for text in [*(p["html"] for p in f["panels"]), *f["notes"]]:
            assert_no_raw_controls(text, f"compare player step {f['step']}")
    assert "\\x1b[2J\\x1b[31mred\\x1b]8;;http://evil\\x1b\\link\\x1b[0m\\x07 admitted: hit tokens " \
        "vllm 24, radix 24" in notes  # fmt: skip
    assert any(n.endswith("… (1000000 characters) admitted: hit tokens vllm 24, radix 24")
               for n in notes)
    from kvlab.cli import main

    res = CliRunner().invoke(main, ["compare", str(path), "--pool-tokens", "64", "--block-size",
                                    "4", "--per-request"], env={"COLUMNS": "200"})  # fmt: skip
    assert res.exit_code == 0, res.output
    assert_no_raw_controls(res.output, "kvlab compare --per-request")
    assert "\\u202eexe.txt\\u202c\\u2066isolate" in res.output and "(1000000 characters)" in res.output
    page = export_compare_html(c, tmp_path / "cmp.html").read_text(encoding="utf-8")
    _assert_no_injected_markup(page, "compare player page")
    state = json.loads(page.split("const state = ", 1)[1].split(", handlers", 1)[0].replace("<\\/", "</"))
    assert_no_raw_controls(json.dumps(state, ensure_ascii=False), "compare player page state")
