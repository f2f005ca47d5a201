"""The exported page in a real browser: what the player's JavaScript drew equals Python's state.

Two checks, both on pages opened from ``file://``:

* several players on one page (``player_html`` + ``html_page``): headless Chromium dumps the
  DOM after the scripts ran; free-queue chips, block-table cells and captions are compared with
  ``trace.state_at`` (needs Chromium only);
* one ``export_html`` page driven through Playwright with every non-local request aborted:
  press step / step over / back / back over, and after each press the index the caption shows
  is Navigator's, the free queue drawn is ``trace.state_at(index).free_queue_order()`` and the
  hash-chain nodes are coloured by the state's cached map; no request was needed.

* the call views (fixed point, allocate_slots, token positions -> slots) on a page of players:
  the drawn fixed-point table equals ``kvlab.viz.calls.fixed_point_rows``, the slots equal
  ``block_id * block_size + position % block_size`` from ``trace.state_at``.

Each skips cleanly without its browser (see tests/viz/_browser.py).
"""

from __future__ import annotations

import collections
import shutil
import subprocess
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest
from _browser import SKIP_REASON, browser_page, click_move, expected_hash_nodes, read_player

from kvlab.figures import hybrid_trace as three_group_trace
from kvlab.trace import EventKind, Trace
from kvlab.viz import Navigator, export_html, html_page, player_html
from kvlab.viz.calls import block_size_of, find_call, fixed_point_rows, slot_layout
from kvlab.viz.snapshot import group_label

BROWSER = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)


VOID = {"input", "meta", "br", "img", "link", "hr", "source", "wbr", "col", "area", "base"}


class _Node:
    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag, self.attrs, self.children = tag, attrs, []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find_all(self, pred: Callable[[_Node], bool]) -> list[_Node]:
        out = [self] if pred(self) else []
        for c in self.children:
            if not isinstance(c, str):
                out += c.find_all(pred)
        return out

    def by_class(self, name: str) -> list[_Node]:
        return self.find_all(lambda n: name in (n.attrs.get("class") or "").split())


class _Tree(HTMLParser):
    """A tiny DOM built from the dumped HTML (stdlib only)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.root = _Node("#document", {})
        self.open = [self.root]
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        node = _Node(tag, {k: v or "" for k, v in attrs})
        self.open[-1].children.append(node)
        if tag not in VOID:
            self.open.append(node)

    def handle_endtag(self, tag: str) -> None:
        for k in range(len(self.open) - 1, 0, -1):
            if self.open[k].tag == tag:
                del self.open[k:]
                break

    def handle_data(self, data: str) -> None:
        self.open[-1].children.append(data)

    def by_id(self, eid: str) -> _Node:
        (node,) = self.root.find_all(lambda n: n.attrs.get("id") == eid)
        return node


def _chip_id(chip: _Node) -> int:
    own = "".join(c for c in chip.children if isinstance(c, str))  # the <small> holds the hash
    return int(own.rstrip("•↔∅"))


@pytest.mark.skipif(BROWSER is None, reason="no Chromium to load the page")
def test_players_draw_the_replayed_state(shared: Trace, hybrid: Trace, tmp_path: Path) -> None:
    touched = shared.find(EventKind.TOUCH, step=4)  # d's hit on block 1
    first_decode = hybrid.calls("allocate_slots", request="b")[1]
    cases = [
        ("p-s20", shared, 20),
        ("p-touch", shared, touched),
        ("p-s62", shared, 62),
        ("p-decode", hybrid, first_decode.end),
    ]
    body = "".join(player_html(t, element_id=eid, index=i) for eid, t, i in cases)
    page = tmp_path / "players.html"
    page.write_text(html_page(body, title="players"))
    dom = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--dump-dom", page.as_uri()],
        check=False, capture_output=True, text=True, timeout=90,
    ).stdout  # fmt: skip
    tree = _Tree(dom)
    for eid, trace, i in cases:
        player = tree.by_id(eid)
        (caption,) = player.by_class("kvlab-caption")
        assert caption.text().startswith(f"event {i:,} of {len(trace):,} · "), eid  # n = a count
        chips = [_chip_id(c) for c in player.by_class("kvlab-chip")]
        assert chips == trace.state_at(i).free_queue_order(), eid
    for eid, trace, _ in cases:  # "jump to" offers exactly the kinds the trace holds, counted
        (select,) = tree.by_id(eid).find_all(
            lambda n: n.tag == "select" and n.attrs.get("aria-label") == "event kind to jump to"
        )
        offered = [(o.attrs["value"], o.text()) for o in select.find_all(lambda n: n.tag == "option")]
        kinds = collections.Counter(trace[j].kind.name for j in range(len(trace)))
        assert offered == [(k.name, f"{k.name} ({kinds[k.name]:,})") for k in EventKind
                           if kinds[k.name]], eid  # fmt: skip
    (source,) = tree.by_id("p-touch").by_class("kvlab-source")
    (link,) = source.find_all(lambda n: n.tag == "a")
    assert source.text() == "mirrors vllm/v1/core/block_pool.py::BlockPool.touch"
    assert link.attrs["href"] == (
        "https://github.com/vllm-project/vllm/blob/v0.22.1/vllm/v1/core/block_pool.py"
    )
    # a hybrid trace (fixed-point turns) shows the fixed-point panel unasked; the other does not
    shown = {eid: [p.attrs["data-view"] for p in tree.by_id(eid).by_class("kvlab-panel")
                   if "hidden" not in p.attrs] for eid, _, _ in cases}  # fmt: skip
    assert "fixed_point" in shown["p-decode"] and "fixed_point" not in shown["p-s20"]
    (panel,) = [p for p in tree.by_id("p-decode").by_class("kvlab-panel")
                if p.attrs.get("data-view") == "block_table"]  # fmt: skip
    (table,) = panel.by_class("kvlab-table")
    rows = [
        [c.text() for c in tr.children if not isinstance(c, str)]
        for tr in table.find_all(lambda n: n.tag == "tr")
    ]
    assert rows[1:] == [
        ["b", "0", "1", "2", "3", "9", "10", "13"],
        ["b", "1", "∅", "∅", "∅", "11", "12", "14"],
    ]


# The moves pressed on the exported page, from the end of b's allocate_slots: through
# b's free (appends), c's allocation (popleft_n, an eviction), back again, and into d's hit.
MOVES = ["into", "over", "over", "back", "back_over", "over", "over", "over", "over", "into",
         "back", "over", "over", "over", "over"]  # fmt: skip


@pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
def test_exported_page_steps_offline(shared: Trace, tmp_path: Path) -> None:
    requests = ["a", "b", "c", "d"]
    start = shared.calls("allocate_slots", request="b")[0].end
    page_path = export_html(
        shared, tmp_path / "t.html", index=start, views=["free_queue", "hash_chain"],
        requests=requests,
    )  # fmt: skip
    nav, root = Navigator(shared), "#kvlab-player"
    seen_queues = set()
    with browser_page() as (page, guard):
        page.goto(page_path.as_uri())
        i = start
        for move in [None, *MOVES]:
            if move is not None:
                click_move(page, root, move)
                i = nav.move(move, i)
            drawn = read_player(page, root)
            assert (drawn.index, drawn.num_events) == (i, len(shared)), move
            assert drawn.free_queue == shared.state_at(i).free_queue_order(), (move, i)
            assert drawn.hash_nodes == expected_hash_nodes(shared, i, requests), (move, i)
            seen_queues.add(tuple(drawn.free_queue))
        page.locator(root).locator(".kvlab-player").press("ArrowLeft")
        assert read_player(page, root).index == nav.back(i)
        # NOTE: the guard is live: a remote fetch from the page is refused and recorded.
        assert (
            page.evaluate("fetch('https://example.com/x').then(() => 'loaded', () => 'refused')")
            == "refused"
        )
    assert guard.blocked == ["https://example.com/x"]
    assert len(seen_queues) >= 5  # the walk really changed the free queue


def _own_text(node: _Node) -> str:
    return "".join(c for c in node.children if isinstance(c, str))


def _expected_fixed_point(trace: Trace, index: int) -> list[list[str]]:
    """Header and rows of the fixed-point table, from kvlab.viz.calls (formatted here)."""
    rows = fixed_point_rows(trace, find_call(trace, index, "get_computed_blocks"))
    columns = list(dict.fromkeys(r.kv_cache_group_ids for r in rows))
    table = [
        ["iteration", *(", ".join(group_label(trace.config, g) for g in ids) for ids in columns)]
    ]
    for it in sorted({r.iteration for r in rows}):
        line = [str(it)]
        for ids in columns:
            r = next(r for r in rows if (r.iteration, r.kv_cache_group_ids) == (it, ids))
            mark = (" ✂" if r.shortened else "") + (" (reused)" if r.reused else "")
            null = trace.initial_state.null_block_id
            blocks = " ".join(  # the hit blocks' line under in → out
                "[" + " ".join("∅" if b == null else str(b) for b in ids) + "]"
                for ids in r.block_ids or ()
            )
            line.append(f"{r.hit_length_in} → {r.hit_length_out}{mark}{blocks}")
        table.append(line)
    return table


def _expected_slots(trace: Trace, index: int) -> list[list[str]]:
    """Drawn slot per group and position (all positions fit) from the Python replayed state."""
    call = find_call(trace, index, "allocate_slots")
    state, r = trace.state_at(index), trace.tables.find_request(call.request)
    num_tokens = slot_layout(call, block_size_of(trace)).num_tokens
    out = []
    for g, per_req in enumerate(state.req_to_blocks):
        bs, blocks = int(trace.config["groups"][g]["block_size"]), per_req.get(r, [])
        out.append([
            "·" if p // bs >= len(blocks) else "∅" if blocks[p // bs] == state.null_block_id
            else str(blocks[p // bs] * bs + p % bs)
            for p in range(num_tokens)
        ])  # fmt: skip
    return out


@pytest.mark.skipif(BROWSER is None, reason="no Chromium to load the page")
def test_page_draws_the_call_views(shared: Trace, tmp_path: Path) -> None:
    three, gcb_end = three_group_trace()
    first_turn = int(three.filter(EventKind.FIXED_POINT_ITERATED)[0])
    alloc = three.calls("allocate_slots", request="r2")[0]
    views = ["slot_mapping", "allocate_slots", "fixed_point"]
    cases = [("p-end", three, gcb_end), ("p-turn", three, first_turn), ("p-alloc", three, alloc.end),
             ("p-mid", three, alloc.begin + 3), ("p-unitary", shared, 20)]  # fmt: skip
    body = "".join(player_html(t, element_id=eid, index=i, views=views) for eid, t, i in cases)
    page = tmp_path / "calls.html"
    page.write_text(html_page(body, title="calls"))
    dom = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--dump-dom", page.as_uri()],
        check=False, capture_output=True, text=True, timeout=90,
    ).stdout  # fmt: skip
    tree = _Tree(dom)

    def table(eid: str, cls: str) -> list[list[_Node]]:
        (t,) = tree.by_id(eid).by_class(cls)
        return [[c for c in tr.children if not isinstance(c, str)]
                for tr in t.find_all(lambda n: n.tag == "tr")]  # fmt: skip

    for eid, trace, i in cases[:2]:
        drawn = [[c.text() for c in row] for row in table(eid, "kvlab-fixed")]
        assert drawn == _expected_fixed_point(trace, i), eid
    # Before the cursor reaches a turn it is faded; the cursor's own turn is outlined.
    cells = [c for row in table("p-turn", "kvlab-fixed")[1:] for c in row[1:]]
    assert [("kvlab-here" in c.attrs.get("class", "")) for c in cells].count(True) == 1
    assert sum("kvlab-future" in c.attrs.get("class", "") for c in cells) == len(cells) - 1
    assert "num_new_computed_tokens = 8" in tree.by_id("p-end").text()
    for eid, trace, i in cases[2:]:
        rows = table(eid, "kvlab-slotmap")
        want = _expected_slots(trace, i)
        assert [[_own_text(c) for c in row[1:]] for row in rows[1:]] == want, eid
    # allocate_slots' layout to scale: new_comp 8 tokens then new 12 tokens, 4 tokens a block.
    segs = tree.by_id("p-alloc").by_class("kvlab-seg")
    widths = {s.attrs["data-segment"]: s.attrs["style"] for s in segs}
    assert list(widths) == ["new_comp", "new"]
    px = float(widths["new_comp"].split("width: ")[1].split("px")[0]) / 2
    assert f"left: {px * 2:g}px; width: {px * 3:g}px" in widths["new"]
    assert "one attention type, no fixed point" in tree.by_id("p-unitary").text()
