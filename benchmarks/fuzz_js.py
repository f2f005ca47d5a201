"""The player's JavaScript decoder as a fuzz target (``benchmarks/fuzz.py player-js``).

Each input is handed to a Node worker (``benchmarks/fuzz_player.mjs``) that parses it as JSON
(the trace_data of an exported page or a widget) and does what the player does on load and on
every move: ``loadTrace``, the checkpoints (``Replayer``), states, event lines, calls, slot
mapping and cursor moves. Allowed: a result, or an ``Error`` whose message starts with
"kvlab" (the decoder's refusals). Anything else (a TypeError, a RangeError from a typed array,
a DOMException from base64, no answer within ``TIMEOUT_S``, the worker dying of memory under
``--max-old-space-size``) is a finding.

Coverage guidance: jazzer.js (the maintained libFuzzer for Node) does not load here (its 4.0.0
prebuild needs glibc 2.38; older releases download their binary from GitHub). The worker reports
V8's precise block coverage of kvlab/viz/static/*.js for each input instead, and this module
turns every block that ran into a call of its own atheris-instrumented Python function (called
up to 8 times, so hit counts become libFuzzer's count buckets): libFuzzer keeps an input exactly
when it reaches new JavaScript blocks, as if the JavaScript were instrumented.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

from fuzz_targets import Target

__all__ = ["MAX_LEN", "TIMEOUT_S", "TOKENS", "PlayerDisallowed", "PlayerError", "target"]

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "benchmarks" / "fuzz_player.mjs"
MAX_LEN = 1 << 16
TIMEOUT_S = 10.0
HEAP_MB = 512
TOKENS = ("format", "kvlab-trace/1", "num_events", "columns", "dtype", "length", "b64", "<i4",
          "|i1", "<u2", "<f8", "initial", "num_blocks", "num_groups", "null_block_id",
          "free_queue", "ref_cnt", "block_hash", "cached", "codes", "offsets", "values",
          "req_to_blocks", "requests", "hashes", "hash_tree", "parent", "position", "chains",
          "key_group_bits", "kinds", "call_names", "call_specs", "config", "groups",
          "block_size", "step_seq", "step_val", "payload", "AAAA", "////", "null", "-1")  # fmt: skip
_NUM_FEATURES = 8192


class PlayerError(Exception):
    """The decoder refused the input with a ``kvlab...`` Error (allowed)."""


class PlayerDisallowed(Exception):
    """The decoder failed otherwise; ``signature`` names the JS error and where."""

    def __init__(self, signature: str, detail: str) -> None:
        super().__init__(f"{signature}: {detail}")
        self.signature = signature


class _Worker:
    def __init__(self) -> None:
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("the player-js target needs Node (>= 18) on PATH")
        self.proc = subprocess.Popen([node, f"--max-old-space-size={HEAP_MB}", str(WORKER)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)  # fmt: skip

    def ask(self, data: bytes) -> dict[str, Any]:
        proc = self.proc
        try:
            proc.stdin.write(struct.pack(">I", len(data)) + data)
            proc.stdin.flush()
        except BrokenPipeError:
            return self._died()
        ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT_S)
        if not ready:
            proc.kill()
            proc.wait()
            return {"outcome": "hang"}
        line = proc.stdout.readline()
        if not line:
            return self._died()
        return json.loads(line)

    def _died(self) -> dict[str, Any]:
        self.proc.wait()
        err = self.proc.stderr.read().decode(errors="replace")
        return {"outcome": "died", "message": err[-600:]}

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)


def _features() -> list[Any]:
    """One tiny function per coverage feature, atheris-instrumented when atheris is running."""
    ns: dict[str, Any] = {}
    src = "\n".join(f"def f{k}():\n    return {k}\n" for k in range(_NUM_FEATURES))
    exec(compile(src, "<player-js-blocks>", "exec"), ns)  # noqa: S102 - our own text
    funcs = [ns[f"f{k}"] for k in range(_NUM_FEATURES)]
    if os.environ.get("KVLAB_FUZZ_CHILD") == "1":
        import atheris

        funcs = [atheris.instrument_func(f) for f in funcs]
    return funcs


class _PlayerTarget:
    def __init__(self) -> None:
        self.worker: _Worker | None = None
        self.index: dict[str, int] = {}
        self.funcs = _features()
        self.last_blocks: list[str] = []

    def __call__(self, path: Path) -> None:
        if self.worker is None:
            self.worker = _Worker()
        reply = self.worker.ask(path.read_bytes())
        self.last_blocks = [key for key, _ in reply.get("blocks", ())]
        for key, count in reply.get("blocks", ()):
            k = self.index.setdefault(key, len(self.index) % _NUM_FEATURES)
            for _ in range(min(int(count), 8)):
                self.funcs[k]()
        outcome = reply["outcome"]
        if outcome in ("hang", "died"):
            self.worker = None
            what = "no answer within %.0f s" % TIMEOUT_S if outcome == "hang" else "worker died"
            raise PlayerDisallowed(f"player-js {outcome}", f"{what}: {reply.get('message', '')}")
        if outcome == "error":
            raise PlayerError(reply["message"])
        if outcome == "disallowed":
            name = reply["message"].split(":", 1)[0]
            raise PlayerDisallowed(f"{name} at {reply.get('where', '?')}", reply["message"])


def target() -> Target:
    """The player-js Target (``execute`` runs it like the Python ones)."""
    return Target("player-js", ".json", _PlayerTarget(), (PlayerError,), MAX_LEN, (), TOKENS,
                  ("kvlab/viz/static/replay.js",), names_file=False)  # fmt: skip
