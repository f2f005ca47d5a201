"""Lab nano_block_manager's report draws the reference BlockManager beside the learner's, after
the divergent call, with the differing entries marked (``≠`` on a red background); the reports of
vLLM labs and of the radix lab gain no such panel."""
from __future__ import annotations

import html
import re

import buggy_block_pool
import buggy_free_queue
import buggy_nano_block_manager as nano
from buggy_radix_cache import BUGS as RADIX_BUGS
from kvlab.labs import check
from kvlab.labs.nano_view import nano_divergence_html, read_state
from kvlab.labs.view import result_html

PANEL = "<div class='kvlab-nano-panel'>"
RED = "background-color: #fde2e1"


def _panels(report: str) -> list[list[tuple[str, list[str]]]]:
    """Each panel as (line's text, the entries on the red background) per line."""
    out = []
    for chunk in report.split(PANEL)[1:]:
        pre = chunk[: chunk.index("</pre>")]
        lines = []
        for line in pre.rstrip("\n").split("\n"):
            text = html.unescape(re.sub(r"<[^>]+>", "", line))
            marked = [html.unescape(m) for m in re.findall(rf'<span style="[^"]*{RED}[^"]*">([^<]*)</span>', line)]
            lines.append((text, marked))
        out.append(lines)
    return out


def test_head_first_shows_the_deque_order_the_learner_broke() -> None:
    result = check("nano_block_manager", nano.HeadFirst, seed=0)
    assert result.divergence.call == "deallocate('s2')"
    ref, yours = _panels(result_html(result))
    common = [
        ("blocks in use", []),
        ("  #6 ref 1 · hash 5522e3e9 · 2 tok", []),
        ("  #7 ref 1 · hash 65bcc649 · 2 tok", []),
        ("  #8 ref 1 · hash 818f9bb8 · 2 tok", []),
    ]
    hashes = [
        ("hash_to_block_id", []),
        ("  5522e3e9→6  585dd3cc→5  65bcc649→7  818f9bb8→8", []),
        ("  9bf33877→1  a5ce0e8c→0  b25d1d1b→4  f3c72c72→3", []),
        ("  fe6d75eb→2", []),
        ("block_table per sequence", []),
        ("  s4: 6 7 8 · num_cached_tokens 0", []),
    ]
    head = "free_block_ids (head first: the next allocate takes it)"
    assert ref == [("nano-vllm (kvlab's re-implementation), at the divergence", []), *common, (head, []),
                   ("  10 9 ≠ 5 ≠ 4 ≠ 3 2 ≠ 1 ≠ 0 ≠", ["9 ≠", "5 ≠", "4 ≠", "2 ≠", "1 ≠", "0 ≠"]),
                   *hashes]  # fmt: skip
    assert yours == [("yours, after the same call", []), *common, (head, []),
                     ("  10 0 ≠ 1 ≠ 2 ≠ 3 4 ≠ 5 ≠ 9 ≠", ["0 ≠", "1 ≠", "2 ≠", "4 ≠", "5 ≠", "9 ≠"]),
                     *hashes]  # fmt: skip


def test_hash_only_hit_shows_the_blocks_the_learner_reused_for_other_tokens() -> None:
    result = check("nano_block_manager", nano.HashOnlyHit, seed=0)
    assert result.divergence.call == "allocate('s35')"
    ref, yours = _panels(result_html(result))
    assert ref[1:8] == [("blocks in use", [])] + [
        (f"  {b} ≠", [f"{b} ≠"]) for b in ("#0 ref 1 · hash 9bf33877 · 2 tok", "#1 ref 1 · hash f3c72c72 · 2 tok",
                                             "#2 ref 1 · hash 585dd3cc · 2 tok", "#4 ref 1 · hash fe6d75eb · 2 tok",
                                             "#5 ref 1 · hash b25d1d1b · 2 tok", "#9 ref 1 · hash a5ce0e8c · 2 tok")]  # fmt: skip
    assert yours[2] == ("  #0 ref 1 · hash a5ce0e8c · 2 tok ≠", ["#0 ref 1 · hash a5ce0e8c · 2 tok ≠"])
    assert ref[9] == ("  3 ≠ 10 8 7 6", ["3 ≠"]) and yours[9] == ("  9 ≠ 10 8 7 6", ["9 ≠"])
    assert ref[12][1] == ["585dd3cc→2 ≠"] and yours[12][1] == ["585dd3cc→5 ≠"]
    assert ref[-1] == ("  s35: 9 ≠ 0 ≠ 4 ≠ 1 ≠ 5 ≠ 2 ≠ · num_cached_tokens 0 ≠",
                       ["9 ≠", "0 ≠", "4 ≠", "1 ≠", "5 ≠", "2 ≠", "· num_cached_tokens 0 ≠"])
    assert yours[-1] == ("  s35: 0 ≠ 1 ≠ 2 ≠ 3 ≠ 4 ≠ 5 ≠ · num_cached_tokens 12 ≠",
                         ["0 ≠", "1 ≠", "2 ≠", "3 ≠", "4 ≠", "5 ≠", "· num_cached_tokens 12 ≠"])


def test_the_chinese_report_has_translated_titles_and_legend() -> None:
    zh = result_html(check("nano_block_manager", nano.KeepsCachedCount, seed=0, lang="zh"))
    ref, yours = _panels(zh)
    assert ref[0][0] == "nano-vllm（kvlab 的复现），停在分歧处"
    assert yours[0][0] == "你的，执行同一个调用之后"
    assert [t for t, _ in yours[1:] if not t.startswith("  ")] == [
        "使用中的块", "free_block_ids（队首在前：下一次 allocate 取走的就是它）", "hash_to_block_id", "各序列的 block_table"]
    assert yours[-1] == ("  s9: [] · num_cached_tokens 4 ≠", ["· num_cached_tokens 4 ≠"])
    assert "≠：另一个 BlockManager 在此处的条目不同" in zh


class _Div:
    source = "nano-vllm"

    def __init__(self, want: dict, got: dict) -> None:
        self.want_state, self.got_state = want, got


def test_an_unreadable_state_draws_nothing_and_strings_are_escaped() -> None:
    div = check("nano_block_manager", nano.HeadFirst, seed=0).divergence
    want = div.want_state
    assert read_state(want)["free"] == [10, 9, 5, 4, 3, 2, 1, 0]
    for broken in ({**want, "ref_count": ["x"] * 11}, {**want, "token_ids": [[]]},
                   {k: v for k, v in want.items() if k != "hash_to_block_id"},
                   {**want, "free_block_ids": None}, {**want, "used_block_ids": [99]}):  # fmt: skip
        assert read_state(broken) is None
        assert nano_divergence_html(_Div(want, broken)) == ""
    assert nano_divergence_html(_Div(want, None)) == ""
    odd = {**want, "block_table": {"<b>x</b>": [6]}, "num_cached_tokens": {"<b>x</b>": 0}}
    page = nano_divergence_html(_Div(want, odd))
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;:" in page


def test_other_labs_reports_draw_no_block_manager() -> None:
    for result in (check("free_queue", buggy_free_queue.AppendAtHead, seed=7),
                   check("block_pool", buggy_block_pool.EagerEviction, seed=0),
                   check("radix_cache", RADIX_BUGS["ignores_lock_ref"], seed=0)):  # fmt: skip
        page = result_html(result)
        assert "<table class='kvlab-divergence'>" in page and page.endswith("</div>")
        assert PANEL not in page and "kvlab-nano-divergence" not in page
