"""The live TracePlayer in a real JupyterLab: run a notebook, press step and back, compare.

Starts JupyterLab on 127.0.0.1 (free port, no token, a temporary root, settings and runtime
dirs; news fetching off), writes a notebook that records a small real trace
(``KVCacheManager`` + ``Recorder``), saves it, and shows a ``TracePlayer`` with the free-queue and
hash-chain views; a second cell moves the cursor from Python and logs every index the kernel
sees. Headless Chromium (Playwright) opens the notebook with every non-local request aborted,
waits for the idle kernel, runs all cells, then presses the widget's buttons. After each press
the index in the widget's caption is the Navigator's, the drawn free queue equals
``trace.state_at(index).free_queue_order()`` of the saved trace, the hash nodes are coloured
by its cached map, and the kernel's ``player.index`` follows. No request left 127.0.0.1.
A second notebook shows a predict-mode player: a forward step stops to ask, a wrong pick keeps
the cursor, the right one reveals (the kernel's index follows).

Skips cleanly without Chromium, playwright, jupyterlab, ipykernel or anywidget.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from _browser import (
    SKIP_REASON,
    browser_page,
    click_move,
    expected_hash_nodes,
    read_player,
    wait_index,
)

from kvlab.trace import load_trace
from kvlab.viz import Navigator


def _skip_reason() -> str | None:
    if SKIP_REASON is not None:
        return SKIP_REASON
    for module in ("jupyterlab", "ipykernel", "anywidget", "ipywidgets", "nbformat"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install jupyterlab==4.6.6 'kvlab[lab]')"
    return None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason())),
]

START = 10  # the index the notebook seeks to from Python after showing the player
REQUESTS = ["a", "b", "c", "d"]

BUILD = """\
from kvlab.core import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheManager,
                        Request, SamplingParams, get_request_block_hasher, init_none_hash, sha256)
from kvlab.trace import Recorder
from kvlab.viz import TracePlayer

init_none_hash(sha256)
spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
config = KVCacheConfig(num_blocks=12, kv_cache_tensors=[],
                       kv_cache_groups=[KVCacheGroupSpec(["layer0"], spec)])
manager = KVCacheManager(config, max_model_len=64, hash_block_size=4)
recorder = Recorder().attach(manager)

def admit(request_id, token_ids):
    request = Request(request_id, token_ids, SamplingParams(max_tokens=4), None,
                      block_hasher=get_request_block_hasher(4, sha256))
    blocks, num_hit = manager.get_computed_blocks(request)
    assert manager.allocate_slots(request, len(token_ids) - num_hit, num_hit, blocks) is not None
    return request

a = admit("a", list(range(100, 114)))             # 4 blocks
b = admit("b", list(range(100, 108)) + [7, 8, 9])  # shares a's first two blocks
manager.free(a)
manager.free(b)
c = admit("c", list(range(100, 110)))             # hits them: touched out of the free queue
d = admit("d", list(range(500, 530)))             # 8 blocks: evicts cached ones
recorder.detach()
trace = recorder.trace()
trace.save("player.kvtrace")
player = TracePlayer(trace, views=["free_queue", "hash_chain"], requests=REQUESTS)
player
""".replace("REQUESTS", repr(REQUESTS))

OBSERVE = """\
from pathlib import Path

def log_index(change):
    with Path("index.log").open("a") as f:
        f.write(f"{change['new']}\\n")

player.observe(log_index, names="index")
player.seek(START)
""".replace("START", str(START))

# Pressed in the browser from START: over whole calls, into one, back over a call and back.
MOVES = ["over", "over", "into", "back", "over", "over", "back_over", "over", "over", "over",
         "over", "back", "over", "over", "over", "over"]  # fmt: skip

ROOT = ".jp-OutputArea-output .kvlab-player"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(BUILD), nbformat.v4.new_code_cell(OBSERVE)],
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                           "language": "python"},
        },
    )  # fmt: skip
    nbformat.write(nb, path)


def _wait_ready(proc: subprocess.Popen, url: str, log: Path, timeout_s: float = 45) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"jupyter lab exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(
        f"jupyter lab did not answer {url} in {timeout_s} s:\n{log.read_text()[-3000:]}"
    )


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A JupyterLab server on 127.0.0.1: (base URL, root dir); stopped afterwards."""
    root, dirs = (
        tmp_path / "root",
        {n: tmp_path / n for n in ("settings", "ws", "cfg", "data", "rt")},
    )
    for d in (root, *dirs.values()):
        d.mkdir()
    # NOTE: no news toast (it covers the notebook and asks the network); see shared/ENV.md.
    news = dirs["settings"] / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    port = _free_port()
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(dirs["cfg"]),
        "JUPYTER_DATA_DIR": str(dirs["data"]),
        "JUPYTER_RUNTIME_DIR": str(dirs["rt"]),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "JUPYTERLAB_SETTINGS_DIR": str(dirs["settings"]),
        "JUPYTERLAB_WORKSPACES_DIR": str(dirs["ws"]),
    }
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--port-retries=0", "--IdentityProvider.token=", "--ServerApp.password=", "--allow-root",
        f"--ServerApp.root_dir={root}", f"--LabApp.user_settings_dir={dirs['settings']}",
        f"--LabApp.workspaces_dir={dirs['ws']}",
    ]  # fmt: skip
    log = tmp_path / "lab.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(proc, f"{base}/api/status", log)
        yield base, root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _run_all(page) -> None:
    # NOTE: Run All clicked while the kernel still initialises is dropped (shared/ENV.md).
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=45_000)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def _logged_index(root: Path, want: int, timeout_s: float = 10) -> int | None:
    """The last index the kernel's observer wrote, once it is ``want`` (or the last seen)."""
    deadline, last = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        lines = (root / "index.log").read_text().split() if (root / "index.log").exists() else []
        last = int(lines[-1]) if lines else None
        if last == want:
            break
        time.sleep(0.1)
    return last


def test_live_player_steps_and_goes_back(lab: tuple[str, Path]) -> None:
    base, root = lab
    _write_notebook(root / "player.ipynb")
    with browser_page(allowed=(f"{base}/", base.replace("http", "ws", 1) + "/")) as (page, guard):
        page.set_default_timeout(30_000)
        page.goto(f"{base}/lab/tree/player.ipynb")
        _run_all(page)
        wait_index(page, ROOT, START, timeout_ms=45_000)  # Python's seek reached the browser
        trace = load_trace(root / "player.kvtrace")
        nav, i, queues = Navigator(trace), START, set()
        for move in [None, *MOVES]:
            if move is not None:
                click_move(page, ROOT, move)
                i = nav.move(move, i)
                wait_index(page, ROOT, i)
            drawn = read_player(page, ROOT)
            assert (drawn.index, drawn.num_events) == (i, len(trace)), move
            assert drawn.free_queue == trace.state_at(i).free_queue_order(), (move, i)
            assert drawn.hash_nodes == expected_hash_nodes(trace, i, REQUESTS), (move, i)
            assert not drawn.hidden_queue_gap
            queues.add(tuple(drawn.free_queue))
        assert _logged_index(root, i) == i  # the browser's moves reached the kernel
    assert guard.blocked == []
    assert len(queues) >= 4  # the walk really changed the free queue


QUIZ_PLAYER = """\
player = TracePlayer(trace, views=["free_queue", "events"], predict=["popleft", "evict"])
player
"""

QUIZ_OBSERVE = OBSERVE.replace(f"player.seek({START})\n", "")


def test_live_player_asks_and_reveals(lab: tuple[str, Path]) -> None:
    """Predict mode in JupyterLab: the kernel's quiz trait drives the questions; the answer's
    move reaches the kernel."""
    import nbformat

    from kvlab.viz import quiz_points

    base, root = lab
    build = BUILD.split("player = TracePlayer(")[0] + QUIZ_PLAYER
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(build), nbformat.v4.new_code_cell(QUIZ_OBSERVE)],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}},
    )  # fmt: skip
    nbformat.write(nb, root / "quiz.ipynb")
    with browser_page(allowed=(f"{base}/", base.replace("http", "ws", 1) + "/")) as (page, guard):
        page.set_default_timeout(30_000)
        page.goto(f"{base}/lab/tree/quiz.ipynb")
        _run_all(page)
        wait_index(page, ROOT, -1, timeout_ms=45_000)
        points = quiz_points(load_trace(root / "player.kvtrace"), ["popleft", "evict"])
        first, box = points[0], page.locator(f"{ROOT} .kvlab-quiz")
        page.locator(f"{ROOT} .kvlab-quiz-bar:not([hidden])").wait_for()
        for _ in range(4):  # step over calls until a forward step is stopped to ask
            click_move(page, ROOT, "over")
            if box.is_visible():
                break
        assert box.is_visible() and read_player(page, ROOT).index == first.ask
        assert first.question in box.inner_text()
        wrong = (first.answer + 1) % len(first.choices)
        page.locator(f'{ROOT} .kvlab-choice[data-choice="{wrong}"]').click()
        assert f"Not {first.choices[wrong]}" in box.inner_text()
        assert read_player(page, ROOT).index == first.ask
        page.locator(f'{ROOT} .kvlab-choice[data-choice="{first.answer}"]').click()
        wait_index(page, ROOT, first.reveal)
        assert first.explanation in box.inner_text()
        assert _logged_index(root, first.reveal) == first.reveal  # the kernel followed
    assert guard.blocked == []
