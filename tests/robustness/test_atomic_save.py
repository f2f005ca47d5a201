"""Trace.save never destroys the previous file: killed mid-write, full disk, bad destination."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
from _robust_helpers import busy_manager

from kvlab.trace import load_trace


def _trace():
    _, rec, _ = busy_manager(hybrid=True)
    return rec.trace()


def _same(a, b) -> bool:
    arrays_a, arrays_b = a.cols.arrays(), b.cols.arrays()
    return (
        arrays_a.keys() == arrays_b.keys()
        and all(np.array_equal(arrays_a[k], arrays_b[k]) for k in arrays_a)
        and a.initial_state == b.initial_state
        and a.tables.requests == b.tables.requests
    )


def _leftovers(directory: Path, keep: str) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name != keep)


KILLED_SAVER = textwrap.dedent(
    """
    import sys, time, zipfile
    sys.path.insert(0, {helpers!r})
    from _robust_helpers import busy_manager
    _, rec, _ = busy_manager(hybrid=False)
    trace = rec.trace()
    real = zipfile.ZipFile.writestr
    count = [0]
    def slow_writestr(self, name, data, *a, **k):
        real(self, name, data, *a, **k)
        count[0] += 1
        if count[0] == 4:            # header and three arrays are written: tell the parent
            print("MID-SAVE", flush=True)
            time.sleep(60)           # ... and wait to be killed
    zipfile.ZipFile.writestr = slow_writestr
    trace.save({path!r})
    print("FINISHED", flush=True)
    """
)


def test_a_save_killed_mid_write_leaves_the_previous_file_intact(tmp_path: Path) -> None:
    path = tmp_path / "run.kvtrace"
    old = _trace()
    old.save(path)
    before = path.read_bytes()
    script = KILLED_SAVER.format(helpers=str(Path(__file__).parent), path=str(path))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "MID-SAVE", line
        temps = _leftovers(tmp_path, path.name)
        assert len(temps) == 1 and temps[0].endswith(".tmp")  # the save is writing a temp file
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert path.read_bytes() == before
    assert _same(load_trace(path), old)


def test_a_full_disk_leaves_the_previous_file_intact(tmp_path, monkeypatch) -> None:
    path = tmp_path / "run.kvtrace"
    old = _trace()
    old.save(path)
    before = path.read_bytes()
    real = zipfile.ZipFile.writestr
    calls = []

    def full_disk(self, name, data, *args, **kwargs):
        calls.append(name)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, name, data, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "writestr", full_disk)
    with pytest.raises(OSError, match="No space left"):
        old.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert _leftovers(tmp_path, path.name) == []  # the temp file is removed
    assert _same(load_trace(path), old)


def test_a_failing_fsync_leaves_the_previous_file_intact(tmp_path, monkeypatch) -> None:
    path = tmp_path / "run.kvtrace"
    old = _trace()
    old.save(path)
    before = path.read_bytes()

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output"):
        old.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before and _leftovers(tmp_path, path.name) == []


def test_save_replaces_the_file_and_keeps_its_permissions(tmp_path: Path) -> None:
    path = tmp_path / "run.kvtrace"
    path.write_bytes(b"old contents")
    path.chmod(0o640)
    trace = _trace()
    size = trace.save(path)
    assert size == path.stat().st_size and path.stat().st_mode & 0o777 == 0o640
    assert _same(load_trace(path), trace) and _leftovers(tmp_path, path.name) == []


def test_a_new_file_gets_the_umask_default_mode(tmp_path: Path) -> None:
    path = tmp_path / "new.kvtrace"
    umask = os.umask(0o022)
    try:
        _trace().save(path)
    finally:
        os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_missing_directory_is_refused_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no directory"):
        _trace().save(tmp_path / "missing" / "x.kvtrace")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        _trace().save(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_trace_that_could_not_load_again_is_refused_before_writing(tmp_path: Path) -> None:
    from kvlab.trace import KVState, Recorder

    path = tmp_path / "run.kvtrace"
    rec = Recorder(initial_state=KVState.fresh(4))
    rec.begin_call("free", 5, ())  # an int request id (vLLM's are strings)
    rec.end_call("free", ())
    with pytest.raises(TypeError, match=r"request ids must be strings .*got \[5\]"):
        rec.trace().save(path)
    rec = Recorder(initial_state=KVState.fresh(4), config={"when": object()})
    with pytest.raises(TypeError, match="config must be JSON-serialisable"):
        rec.trace().save(path)
    assert list(tmp_path.iterdir()) == []
