"""A trace file made by a stranger: request ids, a spec name and config values that try HTML/JS
injection, terminal control sequences, bidi reordering, a lone surrogate and a 1 MB id.
(Not a test module.)"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "viz"))

from _viz_traces import PREFIX, admit, make_manager, make_request, seeded_hashes  # noqa: E402

from kvlab.trace import Recorder, load_trace, save_trace  # noqa: E402

MEGA_ID = "A" * 1_000_000
HOSTILE_IDS = [
    "<script>alert('id')</script>",
    '"><img src=x onerror=alert(1)>',
    "\x1b[2J\x1b[31mred\x1b]8;;http://evil\x1b\\link\x1b[0m\x07",
    "\u202eexe.txt\u202c\u2066isolate\u2069\u200bzw",
    MEGA_ID,
]
HOSTILE_SPEC = "</title><script>alert('spec')</script>\x1b[5mSpec"
UNSAFE_RAW = ("\x1b", "\x07", "\u202e", "\u2066", "\u200b", "\ud800")
"""Raw characters no surface may print."""


def hostile_trace(tmp: Path) -> tuple[Path, Any]:
    """A real recorded trace (one group, prefix sharing, eviction) under hostile names, saved and
    loaded back like a stranger's file: (path, the loaded Trace)."""
    with seeded_hashes():
        m = make_manager(10)
        rec = Recorder().attach(m)
        reqs = [make_request(rid, PREFIX[: 8 + i % 3]) for i, rid in enumerate(HOSTILE_IDS)]
        rec.mark_step(1)
        for r in reqs[:2]:
            assert admit(m, r)
        rec.mark_step(2)
        for r in reqs[:2]:
            m.free(r)
        for step, r in enumerate(reqs[2:], start=3):
            rec.mark_step(step)
            assert admit(m, r)
            m.free(r)
        rec.detach()
    trace = rec.trace()
    trace.config["groups"][0]["spec"] = HOSTILE_SPEC
    trace.config["model"] = "<b>bold</b>\x1b[1mbold\u202e"
    path = tmp / "stranger.kvtrace"
    save_trace(trace, path)
    return path, load_trace(path)


def assert_no_raw_controls(text: str, where: str) -> None:
    """No raw control/bidi character and no 1 MB id reaches ``where``."""
    bad = [repr(c) for c in UNSAFE_RAW if c in text]
    assert not bad, f"{where} shows raw {', '.join(bad)}"
    assert MEGA_ID[:5000] not in text, f"{where} shows the 1 MB id whole"
