"""The exported page in a real browser: what the player's JavaScript drew equals Python's state.

Two checks, both on pages opened from ``file://``:

* several players on one page (``player_html`` + ``html_page``): headless Chromium dumps the
  DOM after the scripts ran; free-queue chips, block-table cells and captions are compared with
  ``trace.state_at`` (needs Chromium only);
* one ``export_html`` page driven through Playwright with every non-local request aborted:
  press step / step over / back / back over, and after each press the index the caption shows
  is Navigator's, the free queue drawn is ``trace.state_at(index).free_queue_order()`` and the
  hash-chain nodes are coloured by the state's cached map; no request was needed.

Each skips cleanly without its browser (see tests/viz/_browser.py).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest
from _browser import SKIP_REASON, browser_page, click_move, expected_hash_nodes, read_player

from kvlab.trace import Trace
from kvlab.viz import Navigator, export_html, html_page, player_html

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
    cases = [
        ("p-s20", shared, 20),
        ("p-s55", shared, 55),
        ("p-s62", shared, 62),
        ("p-h70", hybrid, 70),
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
        assert caption.text().startswith(f"event {i} of {len(trace) - 1}"), eid
        chips = [_chip_id(c) for c in player.by_class("kvlab-chip")]
        assert chips == trace.state_at(i).free_queue_order(), eid
    (table,) = tree.by_id("p-h70").by_class("kvlab-table")
    rows = [
        [c.text() for c in tr.children if not isinstance(c, str)]
        for tr in table.find_all(lambda n: n.tag == "tr")
    ]
    assert rows[1:] == [
        ["b", "0", "1", "2", "3", "9", "10", "13"],
        ["b", "1", "∅", "∅", "∅", "11", "12", "14"],
    ]


# The moves pressed on the exported page, from event 20 of the shared-prefix trace: through
# b's free (appends), c's allocation (popleft_n, an eviction), back again, and into d's hit.
MOVES = ["into", "over", "over", "back", "back_over", "over", "over", "over", "over", "into",
         "back", "over", "over", "over", "over"]  # fmt: skip


@pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
def test_exported_page_steps_offline(shared: Trace, tmp_path: Path) -> None:
    requests = ["a", "b", "c", "d"]
    page_path = export_html(
        shared, tmp_path / "t.html", index=20, views=["free_queue", "hash_chain"],
        requests=requests,
    )  # fmt: skip
    nav, root = Navigator(shared), "#kvlab-player"
    seen_queues = set()
    with browser_page() as (page, guard):
        page.goto(page_path.as_uri())
        i = 20
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
