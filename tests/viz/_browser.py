"""Real-browser helpers for tests/viz (not a test module): Chromium driven by Playwright, offline.

* ``SKIP_REASON``: why a browser test cannot run here (no Chromium, no playwright), or None.
* ``browser_page(allowed)``: a headless Chromium page whose every request (WebSockets too)
  outside ``allowed`` (URL prefixes; ``file:``, ``data:``, ``blob:``, ``about:`` always pass) is
  aborted and recorded in ``guard.blocked``, so a test can assert the page needed nothing from
  the network.
* ``read_player(page, root)``: what a player drew: cursor index (from its caption), the
  free-queue chips in order, the hash-chain nodes.
* ``click_move(page, root, move)``: press the player's button for a Navigator move.

Chromium is ``/usr/bin/chromium`` (Debian package ``chromium``), launched with
``--no-sandbox --disable-gpu --disable-background-networking --disable-dev-shm-usage``
(``KVLAB_CHROMIUM`` names another binary); Playwright's own browser download is never used.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

CHROMIUM = os.environ.get("KVLAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
]
ALWAYS_LOCAL = ("file:", "data:", "blob:", "about:")


def _skip_reason() -> str | None:
    if not os.path.exists(CHROMIUM):
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright (python) is not installed (pip install playwright==1.65.2)"
    return None


SKIP_REASON = _skip_reason()

# The player's buttons by the Navigator move they make (titles from kvlab/viz/static/player.js).
BUTTONS = {
    "into": "step into: one event (→)",
    "over": "step over a call (Shift+→)",
    "out": "step out of the current call (↑)",
    "back": "one event back (←)",
    "back_over": "back over a call (Shift+←)",
}

_READ = """(root) => {
  const caption = root.querySelector(".kvlab-caption b");
  const chips = [...root.querySelectorAll('[data-view="free_queue"] .kvlab-chip')]
    .map((c) => c.firstChild.textContent);  // the <small> after it holds the hash
  const hexes = [...root.querySelectorAll('[data-view="hash_chain"] svg text.kvlab-hex')]
    .map((t) => t.textContent);
  return { caption: caption ? caption.textContent : null, chips, hexes,
    gap: root.querySelectorAll('[data-view="free_queue"] .kvlab-gap').length };
}"""


@dataclass
class Guard:
    """Aborts and records every request outside the allowed prefixes."""

    allowed: tuple[str, ...]
    blocked: list[str] = field(default_factory=list)

    def local(self, url: str) -> bool:
        """True when ``url`` may load."""
        return url.startswith(ALWAYS_LOCAL + self.allowed)

    def __call__(self, route: Any) -> None:
        url = route.request.url
        if self.local(url):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort()

    def refuse_socket(self, ws: Any) -> None:
        """A WebSocket to a non-local address: record it and close it unconnected."""
        self.blocked.append(ws.url)
        ws.close()


@contextlib.contextmanager
def browser_page(allowed: tuple[str, ...] = (), **context: Any) -> Iterator[tuple[Any, Guard]]:
    """A fresh Chromium page with the network guard installed on its context.

    Args:
        allowed: URL prefixes that may load (e.g. ``("http://127.0.0.1:8888/",)``).
        **context: Options for ``browser.new_context`` (viewport, ...).

    Yields:
        (page, guard); ``guard.blocked`` lists the URLs that were refused.
    """
    from playwright.sync_api import sync_playwright

    guard = Guard(tuple(allowed))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            ctx = browser.new_context(viewport={"width": 1280, "height": 1000}, **context)
            ctx.route("**/*", guard)
            # NOTE: page.route does not see WebSockets; local ones (a kernel's) stay untouched.
            ctx.route_web_socket(lambda url: not guard.local(url), guard.refuse_socket)
            yield ctx.new_page(), guard
        finally:
            browser.close()


@dataclass(frozen=True)
class Drawn:
    """What one player shows."""

    index: int
    num_events: int
    free_queue: list[int]
    hash_nodes: dict[str, bool]  # short hex -> drawn as cached (✓)
    hidden_queue_gap: bool


def read_player(page: Any, root: str) -> Drawn:
    """Read the drawn state of the player inside the element matching ``root`` (CSS)."""
    raw = page.locator(root).evaluate(_READ)
    found = re.fullmatch(r"event (-?[\d,]+) of ([\d,]+)", raw["caption"] or "")
    assert found, f"no player caption under {root!r}: {raw['caption']!r}"
    nodes = {}
    for text in raw["hexes"]:
        hex_, mark = text.split(" ")
        nodes[hex_] = mark == "✓"
    return Drawn(
        index=int(found.group(1).replace(",", "")),
        num_events=int(found.group(2).replace(",", "")),  # "event 454 of 1,781": a count
        free_queue=[int(c.rstrip("•↔∅")) for c in raw["chips"]],
        hash_nodes=nodes,
        hidden_queue_gap=raw["gap"] > 0,
    )


def click_move(page: Any, root: str, move: str) -> None:
    """Click the button of ``move`` (a key of BUTTONS) in the player under ``root``."""
    page.locator(root).locator(f'button[title="{BUTTONS[move]}"]').click()


def wait_index(page: Any, root: str, index: int, timeout_ms: int = 10_000) -> None:
    """Wait until the player under ``root`` shows event ``index`` in its caption."""
    page.locator(root).locator(".kvlab-caption b").filter(
        has_text=re.compile(rf"^event {index:,} of [\d,]+$")
    ).wait_for(timeout=timeout_ms)


def expected_hash_nodes(trace: Any, index: int, requests: list[str]) -> dict[str, bool]:
    """Short hex -> cached at ``index``, for the hashes in the chains of ``requests``.

    The independent Python side of what the hash-chain view must draw: chains from
    ``kvlab.viz.build_hash_tree``, cached from ``trace.state_at(index).cached``.
    """
    from kvlab.trace.tables import split_key_code
    from kvlab.viz import build_hash_tree

    tree = build_hash_tree(trace)
    cached = {split_key_code(code)[0] for code in trace.state_at(index).cached}
    return {
        trace.tables.hash_bytes(h)[:4].hex(): h in cached
        for r in requests
        for h in tree.chains.get(r, [])
    }
