"""A lab notebook in a real JupyterLab: a failing implementation shows the divergence view.

The shipped lab 1 notebook, with a learner's FreeKVCacheBlockQueue whose append_n links freed
blocks at the head, is opened in JupyterLab (the tests/viz server fixture, offline) and run in
headless Chromium. The check cell must show the report (the divergent call, vLLM's free queue
above the learner's, the hint) and two players: vLLM's stopped at the divergence, drawing vLLM's
queue, and the learner's state, drawing the learner's queue. No request leaves 127.0.0.1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "viz"))
from _browser import browser_page, read_player  # noqa: E402
from test_browser_jupyterlab import _run_all, _skip_reason, lab  # noqa: E402, F401 - the server fixture

from _labnb import LAB_DIR, solution_cells  # noqa: E402
from kvlab.labs import check  # noqa: E402
from kvlab.labs.solutions import cell_sources  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))]

HEAD_APPEND = (
    "last_block = self.fake_free_list_head\n        old_first = last_block.next_free_block\n        assert",
    "        last_block.next_free_block = old_first\n        old_first.prev_free_block = last_block\n"
    "        self.num_free_blocks += len(blocks)",
)


def _buggy_cell() -> str:
    src = cell_sources("free_queue")[0]
    src = src.replace("last_block = self.fake_free_list_tail.prev_free_block\n        assert", HEAD_APPEND[0])
    return src.replace(
        "        last_block.next_free_block = self.fake_free_list_tail\n"
        "        self.fake_free_list_tail.prev_free_block = last_block\n"
        "        self.num_free_blocks += len(blocks)", HEAD_APPEND[1])


def test_a_failing_lab_shows_vllm_and_the_learner_side_by_side(lab: tuple[str, Path]) -> None:  # noqa: F811
    import nbformat

    base, root = lab
    nb = nbformat.read(LAB_DIR / "lab01_free_queue.ipynb", as_version=4)
    solution_cells(nb)[0].source = _buggy_cell()
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith("check("):
            cell.source = 'check("free_queue", FreeKVCacheBlockQueue, seed=7)'
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.write(nb, root / "lab01.ipynb")
    # What the kernel will compute, computed here: the same class, the same seed.
    namespace: dict = {}
    exec(compile("from kvlab.core import KVCacheBlock\n" + _buggy_cell(), "lab01", "exec"), namespace)
    expected = check("free_queue", namespace["FreeKVCacheBlockQueue"], seed=7)
    div = expected.divergence
    assert expected.misconception == "free_queue.append_at_head"

    with browser_page(allowed=(f"{base}/", base.replace("http", "ws", 1) + "/")) as (page, guard):
        page.set_default_timeout(45_000)
        page.goto(f"{base}/lab/tree/lab01.ipynb")
        _run_all(page)
        view = page.locator(".kvlab-divergence-view")
        view.wait_for()
        text = view.inner_text()
        assert f"operation {div.step}: {div.call}" in text
        assert "free queue" in text and str(div.want) in text.replace(" ", " ")
        assert "LRU order: a freed block joins the tail" in text
        players = view.locator(".kvlab-player")
        assert players.count() == 2
        left = read_player(page, ".kvlab-divergence-view .widget-hbox > div:first-child .kvlab-player")
        right = read_player(page, ".kvlab-divergence-view .widget-hbox > div:last-child .kvlab-player")
        assert left.free_queue == div.want and left.index == left.num_events - 1
        assert right.free_queue == div.got
    assert guard.blocked == []
