"""Benchmark: the trace player's JavaScript in headless Chromium (Playwright), big pool, long trace.

    .venv/bin/python benchmarks/bench_player.py [--blocks 8192] [--events 200000] [--loads 5]

Records a seeded random serving workload (default 8,192 blocks, 200,000 events), writes one
page with one player (``html_page(player_html(...))``, all views shown, as ``export_html``
writes it), opens it from ``file://`` in ``/usr/bin/chromium`` with every non-local request
blocked, and measures, in milliseconds (labels end in ``_ms``):

* load: navigation start until the player has drawn (HTML parse, JSON parse of the state,
  base64 decode, the one replay that builds every checkpoint, first draw), plus those parts
  timed on their own;
* first jump: the first ``seek`` after a fresh load to a far event, for ``--loads`` fresh loads
  with different targets (the case that used to wait for background checkpoints);
* warm jumps: 40 seeded random targets in one page;
* step redraw: 100 steps into / back / over, median, p95 and max.

"sync" is the JavaScript time of the call (replay + drawing, including the layouts the drawing
forces); "frame" adds the wait until the browser produced the next frame (rAF + a task): an
upper bound of what a learner waits (it includes up to one 16.7 ms frame interval).
Goals (issue 4): a jump < 100 ms, a step < 50 ms.

Writes benchmarks/results/player.md (with the machine named) and prints one JSON line.
Needs ``playwright`` (python, tested 1.65.2) and Chromium at /usr/bin/chromium (Debian:
``apt-get install -y chromium``), through tests/viz/_browser.py; Playwright's own browser
download is not used.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "viz"))
from _browser import CHROMIUM, SKIP_REASON, browser_page
from _viz_traces import serving_trace

from kvlab.viz import html_page, player_html

RESULTS = Path(__file__).resolve().parent / "results" / "player.md"

# After the player's own scripts: when the page finished drawing the player.
_MARK = "<script>window.__kvlabDrawn = performance.now();</script>\n"

# page.evaluate bodies; `box` is the player's testing hook (kvlab/viz/static/player.js).
_TIMERS = """
  const box = document.getElementById("bench").kvlabPlayer;
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  async function timed(f) {
    const t0 = performance.now(); f(); const t1 = performance.now(); await frame();
    return [t1 - t0, performance.now() - t0];
  }
"""

_FIRST_JUMP = (
    "async (j) => {" + _TIMERS + "const [s, f] = await timed(() => box.seek(j));"
    " return {sync: s, frame: f, index: box.model.get('index')}; }"
)

_LOAD_PARTS = """() => {
  const box = document.getElementById("bench").kvlabPlayer, tag = document.querySelector("script[data-kvlab-player]");
  const t0 = performance.now(); JSON.parse(tag.textContent); const parse = performance.now() - t0;
  const nav = performance.getEntriesByType("navigation")[0];
  return { drawn: window.__kvlabDrawn, dom_content_loaded: nav.domContentLoadedEventEnd,
    json_parse: parse, ...box.timings, num_checkpoints: box.R.checkpoints.size, interval: box.R.interval,
    heap_mb: performance.memory ? performance.memory.usedJSHeapSize / 2 ** 20 : null };
}"""

_SERIES = (
    "async ([targets, moves]) => {"
    + _TIMERS
    + """
  const out = { jump: [], into: [], back: [], over: [] };
  for (const j of targets) out.jump.push(await timed(() => box.seek(j)));
  box.seek(Math.floor(box.T.n / 2));
  for (const m of ["into", "back", "over"]) for (let k = 0; k < moves; k++) out[m].push(await timed(() => box.act(m)));
  return out;
}"""
)


def _stats(pairs: list[list[float]]) -> dict[str, float]:
    sync, frame = [p[0] for p in pairs], [p[1] for p in pairs]
    return {
        "sync_median_ms": round(median(sync), 1),
        "sync_max_ms": round(max(sync), 1),
        "frame_median_ms": round(median(frame), 1),
        "frame_p95_ms": round(sorted(frame)[int(0.95 * (len(frame) - 1))], 1),
        "frame_max_ms": round(max(frame), 1),
    }


def _browser_version() -> str:
    out = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip()


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}"


def _open(ctx: Any, uri: str) -> tuple[Any, float]:
    """A new page in ``ctx`` showing ``uri``, once the player has drawn; (page, wall seconds)."""
    page = ctx.new_page()
    t0 = time.perf_counter()
    page.goto(uri)
    page.wait_for_function("window.__kvlabDrawn !== undefined")
    wall = time.perf_counter() - t0
    page.wait_for_timeout(300)  # NOTE: let the page settle, as a learner would before a jump
    return page, wall


def measure(page_path: Path, num_events: int, loads: int, seed: int = 0) -> dict[str, Any]:
    """Open the page ``loads`` times (a first jump each) and once more (the series)."""
    rng = random.Random(seed)
    firsts = [num_events - 1, num_events // 2, (3 * num_events) // 4, num_events // 3, 5000]
    firsts = (firsts * loads)[:loads]
    res: dict[str, Any] = {"first_jump": [], "load": []}
    with browser_page() as (blank, guard):
        ctx = blank.context  # NOTE: the guard is routed on the context: it covers every page
        for target in firsts:
            page, wall = _open(ctx, page_path.as_uri())
            res["load"].append({"wall_s": wall, **page.evaluate(_LOAD_PARTS)})
            jump = page.evaluate(_FIRST_JUMP, target)
            assert jump["index"] == target, jump
            res["first_jump"].append({"target": target, **jump})
            page.close()
        page, _ = _open(ctx, page_path.as_uri())
        targets = [rng.randrange(-1, num_events) for _ in range(40)]
        series = page.evaluate(_SERIES, [targets, 100])
    res["series"] = {k: _stats(v) for k, v in series.items()}
    res["blocked_requests"] = list(guard.blocked)
    return res


def _summary(raw: dict[str, Any], page_bytes: int, n: int, blocks: int) -> dict[str, Any]:
    loads, firsts = raw["load"], raw["first_jump"]
    keys = ("drawn", "json_parse", "decode_ms", "checkpoints_ms", "first_draw_ms")
    return {
        "num_blocks": blocks,
        "num_events": n,
        "page_bytes": page_bytes,
        "load_ms_median": {k: round(median(x[k] for x in loads), 1) for k in keys},
        "load_wall_s_median": round(median(x["wall_s"] for x in loads), 2),
        "num_checkpoints": loads[0]["num_checkpoints"],
        "checkpoint_interval": loads[0]["interval"],
        "heap_mb": None if loads[0]["heap_mb"] is None else round(loads[0]["heap_mb"], 1),
        "first_jump_sync_ms": [round(f["sync"], 1) for f in firsts],
        "first_jump_frame_ms": [round(f["frame"], 1) for f in firsts],
        "first_jump_targets": [f["target"] for f in firsts],
        **{f"{k}": v for k, v in raw["series"].items()},
        "blocked_requests": len(raw["blocked_requests"]),
    }


def _write_markdown(s: dict[str, Any], seconds: float) -> None:
    lm, jump, into, back, over = (s[k] for k in ("load_ms_median", "jump", "into", "back", "over"))

    def ok(value: float, goal: float) -> str:
        return "ok" if value < goal else "MISSED"

    first_max = max(s["first_jump_frame_ms"])
    rows = [
        ("page size (export_html, one player)", f"{s['page_bytes'] / 2**20:.2f} MiB", ""),
        ("load: navigation start → player drawn", f"{lm['drawn']:.0f} ms", ""),
        (
            "  of which JSON.parse of the state (timed again after load)",
            f"{lm['json_parse']:.0f} ms",
            "",
        ),
        ("  of which base64 decode + call index", f"{lm['decode_ms']:.0f} ms", ""),
        (
            f"  of which the replay that builds all {s['num_checkpoints']} checkpoints",
            f"{lm['checkpoints_ms']:.0f} ms (every {s['checkpoint_interval']} events)",
            "",
        ),
        ("  of which the first draw", f"{lm['first_draw_ms']:.0f} ms", ""),
        ("JS heap after load", f"{s['heap_mb']} MiB", ""),
        (
            f"first jump after a fresh load, {len(s['first_jump_sync_ms'])} loads (sync)",
            " / ".join(f"{v:.1f}" for v in s["first_jump_sync_ms"]) + " ms",
            "",
        ),
        (
            "first jump after a fresh load, to the next frame",
            " / ".join(f"{v:.1f}" for v in s["first_jump_frame_ms"]) + " ms",
            f"< 100 (each) {ok(first_max, 100)}",
        ),
    ]
    for label, st, goal in (
        ("warm jump, 40 random targets", jump, 100),
        ("step into (→), 100 steps", into, 50),
        ("step back (←), 100 steps", back, 50),
        ("step over a call (⇧→), 100 steps", over, 50),
    ):
        rows.append(
            (
                label,
                (
                    f"sync: median {st['sync_median_ms']}, max {st['sync_max_ms']} ms; "
                    f"to the next frame: median {st['frame_median_ms']}, "
                    f"p95 {st['frame_p95_ms']}, max {st['frame_max_ms']} ms"
                ),
                f"< {goal} (p95) {ok(st['frame_p95_ms'], goal)}",
            )
        )
    text = "\n".join(
        [
            "# kvlab trace player benchmark (headless Chromium)",
            "",
            (
                f"Machine: {_machine()}; {_browser_version()} headless (--disable-gpu), "
                f"Python {platform.python_version()}, viewport 1280x1000, all five views shown; "
                f"load average at the end {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
                "(a shared machine: the max of a series moves with the load)."
            ),
            (
                f"Workload: `serving_trace({s['num_blocks']}, {s['num_events']})` "
                f"(tests/viz/_viz_traces.py), a seeded serving run of {s['num_blocks']:,} blocks "
                f"and {s['num_events']:,} events, opened from file:// with every non-local "
                f"request blocked ({s['blocked_requests']} were attempted). "
                f"Benchmark wall time {seconds:.0f} s."
            ),
            (
                "Run: `.venv/bin/python benchmarks/bench_player.py` (medians of the loads; "
                '"sync" = the JavaScript call, "next frame" adds the wait for the next frame).'
            ),
            "",
            "| measure | value | goal |",
            "|---|---|---|",
            *(f"| {a} | {b} | {c} |" for a, b, c in rows),
            "",
        ]
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text, encoding="utf-8")


def main() -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=8192, help="num_gpu_blocks (blocks)")
    ap.add_argument("--events", type=int, default=200_000, help="events recorded, at least")
    ap.add_argument("--loads", type=int, default=5, help="fresh page loads (first jumps)")
    ap.add_argument("--no-write", action="store_true", help="do not write results/player.md")
    args = ap.parse_args()
    if SKIP_REASON is not None:
        raise SystemExit(f"cannot run: {SKIP_REASON}")
    t0 = time.perf_counter()
    trace = serving_trace(args.blocks, args.events)
    page = html_page(player_html(trace, element_id="bench"), title="player benchmark")
    page = page.replace("</body>", _MARK + "</body>")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.html"
        path.write_text(page, encoding="utf-8")
        raw = measure(path, len(trace), args.loads)
    summary = _summary(raw, len(page.encode()), len(trace), args.blocks)
    if not args.no_write:
        _write_markdown(summary, time.perf_counter() - t0)
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
