"""The browser playground's load and run times, side by side with bare Pyodide, in Chromium.

    python benchmarks/bench_playground.py [--rounds 3] [--out benchmarks/results/playground.md]

Builds the folder (``kvlab playground``), serves it on 127.0.0.1 and, in fresh headless Chromium
contexts (no cache), alternates two pages: a bare page that only calls ``loadPyodide`` (the
baseline: what any Pyodide page pays) and the playground, whose first run (page opened to trace
drawn) adds unpacking kvlab, importing kvlab.core, running the default preset and drawing it.
Then it times every preset run again on the warm page against the same run in CPython. Reports
medians, the ratio playground / bare Pyodide, and the machine's load average (the machine is
shared: absolute times vary with load, ratios much less).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "viz"))

BARE = """<!doctype html><script src="pyodide/pyodide.js"></script><script>
const t0 = performance.now();
loadPyodide({indexURL: new URL("pyodide/", location.href).href})
  .then(() => { window.bare = performance.now() - t0; });
</script>"""


def main() -> int:
    from _browser import browser_page

    from kvlab.playground import PRESETS, parse_scenario, run_scenario
    from kvlab.playground.build import build_playground
    from kvlab.playground.cli import serve

    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--out", type=Path, default=REPO / "benchmarks" / "results" / "playground.md"
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp()) / "playground"
    report = build_playground(folder)
    (folder / "bare.html").write_text(BARE, encoding="utf-8")
    server = serve(folder, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    bare, first, stages = [], [], []
    for _ in range(args.rounds):
        with browser_page((base,)) as (page, _guard):
            page.goto(base + "bare.html")
            page.wait_for_function("() => window.bare", timeout=120_000)
            bare.append(page.evaluate("() => window.bare"))
        with browser_page((base,)) as (page, _guard):
            page.goto(base + "index.html")
            page.wait_for_function(
                "() => window.kvlabPlayground && window.kvlabPlayground.last", timeout=120_000
            )
            timings = page.evaluate("() => window.kvlabPlayground.timings")
            first.append(timings["first_run"])
            stages.append(timings)
    runs = []
    with browser_page((base,)) as (page, _guard):
        page.goto(base + "index.html")
        page.wait_for_function(
            "() => window.kvlabPlayground && window.kvlabPlayground.last", timeout=120_000
        )
        for name, preset in PRESETS.items():
            browser_ms = []
            for _ in range(3):
                t0 = page.evaluate("() => performance.now()")
                answer = page.evaluate("(s) => window.kvlabPlayground.run(s)", preset.scenario)
                browser_ms.append(page.evaluate("() => performance.now()") - t0)
                assert answer["ok"], answer
            cpython_ms = []
            for _ in range(3):
                t0 = time.perf_counter()
                run_scenario(parse_scenario(preset.scenario))
                cpython_ms.append((time.perf_counter() - t0) * 1000)
            runs.append((name, answer["num_events"], min(browser_ms), min(cpython_ms)))
    server.shutdown()
    med = statistics.median

    def ms(values: list[float]) -> str:
        return ", ".join(f"{x:.0f}" for x in values)

    start = med([s["stage1"] - s["stage0"] for s in stages]) / 1000
    unpack = med([s["stage3"] - s["stage1"] for s in stages]) / 1000
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        "# kvlab playground: load and run times in Chromium",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{platform.system()}; Chromium headless; load average at the end {load} (shared "
        "machine: absolute times vary with load, the ratios less).",
        f"Command: `python benchmarks/bench_playground.py --rounds {args.rounds}`; folder "
        f"{report.total_bytes / 1e6:.1f} MB ({len(report.sizes)} files), served on 127.0.0.1.",
        "",
        "| measure | median of rounds | rounds (ms) |",
        "|---|---|---|",
        f"| bare Pyodide: loadPyodide() (baseline) | {med(bare) / 1000:.2f} s | {ms(bare)} |",
        f"| playground: page opened to first trace drawn | {med(first) / 1000:.2f} s "
        f"| {ms(first)} |",
        f"| ratio playground first run / bare Pyodide | {med(first) / med(bare):.2f}x | |",
        f"| of which Pyodide start (stage 0 to 1) | {start:.2f} s | |",
        f"| of which unpack + import kvlab.core | {unpack:.2f} s | |",
        f"| of which the first run (Python) | {med([s['run'] for s in stages]):.0f} ms | |",
        "",
        "Warm page, each preset (best of 3), against the same scenario run in CPython (no "
        "recorder):",
        "",
        "| preset | events | browser: run + encode + draw | CPython: run | ratio |",
        "|---|---|---|---|---|",
        *(f"| {n} | {e} | {b:.0f} ms | {c:.1f} ms | {b / c:.0f}x |" for n, e, b, c in runs),
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    print(json.dumps({"bare_ms": bare, "first_ms": first}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
