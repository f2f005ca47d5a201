"""Two processes saving traces to the same path while a third reads it: every read gives one of
the two traces whole (never a torn or mixed file), the last save wins whole, and no temporary
file is left behind. save_trace writes a temporary file next to the target and renames it over
the target (os.replace); a reader holding the old file keeps reading the old file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from _robust_helpers import busy_manager

from kvlab.trace import load_trace, save_trace

WRITER = textwrap.dedent(
    """
    import sys
    from kvlab.trace import load_trace, save_trace
    source, target, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    trace = load_trace(source)
    print("ready", flush=True)
    sys.stdin.readline()  # NOTE: both writers start together
    for _ in range(rounds):
        save_trace(trace, target)
    """
)


def _fingerprint(trace) -> tuple:
    return len(trace), tuple(trace.tables.requests), trace.cols.kind.tobytes()


def test_two_writers_one_reader_see_only_whole_traces(tmp_path: Path) -> None:
    trace_a, trace_b = busy_manager()[1].trace(), busy_manager(hybrid=True)[1].trace()
    a, b, target = tmp_path / "a.kvtrace", tmp_path / "b.kvtrace", tmp_path / "shared.kvtrace"
    save_trace(trace_a, a)
    save_trace(trace_b, b)
    save_trace(trace_a, target)
    allowed = {_fingerprint(load_trace(a)), _fingerprint(load_trace(b))}
    assert len(allowed) == 2
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(src), str(target), "40"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                env=env) for src in (a, b)]  # fmt: skip
    for w in writers:
        assert w.stdout.readline().strip() == "ready"
    for w in writers:
        w.stdin.write("go\n")
        w.stdin.flush()
    reads, seen = 0, set()
    while any(w.poll() is None for w in writers) or reads < 20:
        seen.add(_fingerprint(load_trace(target)))  # NOTE: raises on a torn file
        reads += 1
        time.sleep(0.001)
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    assert seen <= allowed and reads >= 20
    assert _fingerprint(load_trace(target)) in allowed  # the last save, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.kvtrace", "b.kvtrace",
                                                          "shared.kvtrace"]  # fmt: skip
