"""render_lines: the text of an explanation names the cap, the miss and the reason."""

from __future__ import annotations

from _trace_helpers import admit, init_hashing, make_manager, make_request

from kvlab.trace import Recorder, explain
from kvlab.trace.explain_text import render_lines


def test_caching_off_is_explained_as_no_lookup() -> None:
    init_hashing()
    m = make_manager(16, enable_caching=False)
    rec = Recorder().attach(m)
    assert admit(m, make_request("a", list(range(12))))
    t = rec.trace()
    lines = render_lines(explain(t, t.calls(name="get_computed_blocks")[0]))
    assert lines[0] == (
        "get_computed_blocks for request a (event #0, step 0): hit 0 of 12 tokens (0 blocks of 4)"
    )
    assert lines[1] == (
        "  cap: at most num_tokens - 1 = 11 tokens (2 full blocks); the last token is recomputed"
    )
    assert lines[-2:] == [
        "  no lookup: prefix caching is off or the request skips it",
        "  reason: no_lookup",
    ]


def test_complete_hit_text() -> None:
    init_hashing()
    m = make_manager(16)
    rec = Recorder().attach(m)
    assert admit(m, make_request("a", list(range(10))))
    assert admit(m, make_request("b", list(range(10))))
    t = rec.trace()
    lines = render_lines(explain(t, t.calls(name="get_computed_blocks")[1]))
    assert "  iteration 0 groups [0] (FullAttentionSpec): max 9 tokens, 2 probes, 2 hits" in lines
    assert lines[-1] == "  reason: complete"
