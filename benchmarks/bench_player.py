"""Benchmark of the trace player's JavaScript in headless Chromium (not a test; run by hand).

    .venv/bin/python benchmarks/bench_player.py [num_blocks] [num_events]

Records a random serving workload (default 8,192 blocks, 200,000 events), builds a page with
one player, and measures in the browser: first render, jumps before and after the background
checkpoints exist, and single-step redraws forward and back (all views shown). Prints one JSON
line with times in milliseconds (labels end in ``_ms``). Needs Chromium on PATH.

(The lead may move this next to the other benchmarks; it only uses public kvlab.viz names.)
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "viz"))
from _viz_traces import serving_trace

from kvlab.viz import html_page, player_html

_MEASURE = """
<pre id="bench-out">pending</pre>
<script>
(function () {
  var box = document.getElementById("bench").kvlabPlayer;   // the player's testing hook
  var state = JSON.parse(document.querySelector("script[data-kvlab-player]").textContent);
  var n = state.num_events, res = {};
  function time(f) { var t0 = performance.now(); f(); return performance.now() - t0; }
  function median(xs) { xs.sort(function (a, b) { return a - b; }); return xs[xs.length >> 1]; }
  function phase(tag) {
    var jumps = [n - 1, 7, n >> 1, Math.floor(n * 0.75), 123, n - 2, Math.floor(n / 3)];
    res[tag + "_jumps_ms"] = jumps.map(function (j) { return +time(function () { box.seek(j); }).toFixed(1); });
    var fwd = [], back = [];
    for (var k = 0; k < 50; k++) fwd.push(time(function () { box.act("into"); }));
    for (var k = 0; k < 50; k++) back.push(time(function () { box.act("back"); }));
    res[tag + "_step_median_ms"] = +median(fwd).toFixed(1);
    res[tag + "_step_max_ms"] = +Math.max.apply(null, fwd).toFixed(1);
    res[tag + "_back_median_ms"] = +median(back).toFixed(1);
    res[tag + "_back_max_ms"] = +Math.max.apply(null, back).toFixed(1);
  }
  phase("cold");
  res.warm_all_checkpoints_ms = +time(function () { box.R.warm(1e9); }).toFixed(1);
  phase("warm");
  res.num_events = n; res.num_blocks = box.T.numBlocks;
  document.getElementById("bench-out").textContent = JSON.stringify(res);
})();
</script>
"""


def main(num_blocks: int = 8192, num_events: int = 200_000) -> dict:
    browser = next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p),
        None,
    )
    if browser is None:
        raise SystemExit("needs Chromium on PATH")
    trace = serving_trace(num_blocks, num_events)
    page = html_page(player_html(trace, element_id="bench"), title="player benchmark")
    # NOTE: the measuring script must run after the player rendered (after the page scripts).
    page = page.replace("</body>", _MEASURE + "</body>")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.html"
        path.write_text(page, encoding="utf-8")
        t0 = time.perf_counter()
        dom = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--dump-dom", path.as_uri()],
            check=False, capture_output=True, text=True, timeout=300,
        ).stdout  # fmt: skip
        page_s = time.perf_counter() - t0
    found = re.search(r'<pre id="bench-out">([^<]*)</pre>', dom)
    result = json.loads(found.group(1)) if found and found.group(1) != "pending" else {}
    result["page_load_and_run_s"] = round(page_s, 2)
    result["page_bytes"] = len(page.encode())
    return result


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    print(json.dumps(main(*args)))
