"""export_html: one self-contained page (player and trace inlined, nothing fetched)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvlab.trace import KVState, Recorder, Trace
from kvlab.viz import encode_trace, export_html

STATE_TAG = re.compile(
    r'<script type="application/json" data-kvlab-player="([^"]+)">(.*?)</script>', re.DOTALL
)


def _state(page: str) -> dict:
    (match,) = STATE_TAG.findall(page)
    return json.loads(match[1])


def test_page_inlines_player_and_trace(shared: Trace, tmp_path: Path) -> None:
    out = export_html(
        shared,
        tmp_path / "deep" / "trace.html",
        title="Shared <prefix>",
        index=40,
        views=["pool", "free_queue"],
        requests=["a", "c"],
    )
    assert out == tmp_path / "deep" / "trace.html"
    page = out.read_text()
    assert "<title>Shared &lt;prefix&gt;</title>" in page
    state = _state(page)
    assert state["trace_data"] == json.loads(json.dumps(encode_trace(shared)))
    assert (state["index"], state["views"], state["requests"]) == (
        40,
        ["pool", "free_queue"],
        ["a", "c"],
    )
    assert "window['kvlabPlayer'] = { render" in page and ".kvlab-player {" in page


def test_page_fetches_nothing(shared: Trace, tmp_path: Path) -> None:
    page = export_html(shared, tmp_path / "t.html").read_text()
    for pattern in (r"\ssrc\s*=", r"\shref\s*=", r"@import", r"url\(", r"<link", r"\bimport\("):
        assert not re.search(pattern, page), pattern


def test_hostile_request_ids_cannot_close_the_script(tmp_path: Path) -> None:
    rec = Recorder(initial_state=KVState.fresh(4))
    rec.begin_call("free", "</script><b>x", ())
    rec.end_call("free", ())
    page = export_html(rec.trace(), tmp_path / "t.html").read_text()
    assert _state(page)["trace_data"]["requests"] == ["</script><b>x"]
    assert "</script><b>" not in page


def test_bad_settings_write_nothing(shared: Trace, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown player setting\(s\) \['colour'\]"):
        export_html(shared, tmp_path / "a.html", colour="red")
    with pytest.raises(ValueError, match=rf"index must be in \[-1, {len(shared)}\)"):
        export_html(shared, tmp_path / "b.html", index=len(shared))
    assert list(tmp_path.iterdir()) == []
