"""Opening a stranger's file writes nothing, and saving or exporting it writes only the paths
the user named (docs/explanation/trace-format.md, "Nothing is written outside the folder you
chose"). Every file operation is watched through CPython's audit hooks (``open`` for writing,
rename, remove, mkdir, link...), so a write anywhere (a zip entry extracted, a path built from
a request id) is caught wherever it would land."""

from __future__ import annotations

import os
import sys
import zipfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from _hostile import hostile_trace
from click.testing import CliRunner

from kvlab.trace import load_trace, save_trace
from kvlab.trace.fileformat import TraceFormatError

DATA = Path(__file__).resolve().parents[1] / "data"
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_CHANGES = {"os.rename", "os.replace", "os.remove", "os.rmdir", "os.mkdir", "os.link",
            "os.symlink", "os.truncate", "shutil.copyfile", "shutil.move", "shutil.rmtree"}  # fmt: skip
_WATCH: list[list[str]] = []  # NOTE: audit hooks cannot be removed: on while a list is here


def _hook(event: str, args: tuple) -> None:
    if not _WATCH:
        return
    if event == "open":
        path, mode, flags = (list(args) + [None, None])[:3]
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS)  # fmt: skip
        if not writes:
            return
        paths = [path]
    elif event in _CHANGES:
        paths = [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
    else:
        return
    for p in paths:
        if isinstance(p, int):
            continue
        text = os.fsdecode(p)
        if "__pycache__" not in text:  # NOTE: an import compiling a module is not the reader
            _WATCH[-1].append((event, os.path.realpath(text)))


sys.addaudithook(_hook)


@contextmanager
def writes():  # type: ignore[no-untyped-def]
    """(audit event, real path) of each write, rename, removal or creation inside the block."""
    seen: list[str] = []
    _WATCH.append(seen)
    try:
        yield seen
    finally:
        _WATCH.pop()


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory):
    return hostile_trace(tmp_path_factory.mktemp("stranger"))


def _escaping_copy(src: Path, dest: Path) -> Path:
    """The trace with extra entries named to escape any folder they were extracted into."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w") as zout:
        for name in zin.namelist():
            zout.writestr(name, zin.read(name))
        for name in ("../../escaped.txt", "/tmp/kvlab-escaped-absolute.txt",
                     "..\\..\\escaped-windows.txt", "nested/../../../escaped-nested.txt"):  # fmt: skip
            zout.writestr(name, b"written by a stranger's trace")
    return dest


def test_loading_and_reading_strangers_files_writes_nothing(stranger, tmp_path: Path) -> None:
    from kvlab.cli import main
    from kvlab.kv_events import read_kv_event_file, read_kv_event_messages
    from kvlab.traffic import iter_mooncake

    path, _ = stranger
    escaping = _escaping_copy(path, tmp_path / "escaping.kvtrace")
    load_trace(escaping)  # NOTE: warm-up: first imports may write caches, not the reader
    runner = CliRunner()
    before = sorted(p for p in tmp_path.parent.rglob("*"))
    with writes() as seen:
        trace = load_trace(escaping)
        for args in (["trace", "info", str(escaping)], ["trace", "show", str(escaping), "--event", "3"]):
            res = runner.invoke(main, args)
            assert res.exit_code == 0, res.output
        for name in ("vllm-0.22.1.kvev", "vllm-0.33.0.kvev"):
            assert len(read_kv_event_file(DATA / "kv_events" / name).trace()) > 0
            assert len(list(read_kv_event_messages(DATA / "kv_events" / name))) > 0
        list(iter_mooncake(DATA / "mooncake" / "conversation_excerpt.jsonl"))
        bad = tmp_path / "not-a-trace.kvtrace"
        bad.write_bytes(b"PK\x03\x04" + b"\0" * 64)
        with pytest.raises(TraceFormatError, match="not-a-trace.kvtrace"):
            load_trace(bad)
    assert seen == [("open", str(bad.resolve()))]  # NOTE: only the test's own file
    assert len(trace) > 0 and sorted(tmp_path.parent.rglob("*")) == sorted([*before, bad])
    assert not Path("/tmp/kvlab-escaped-absolute.txt").exists()


def test_saving_and_exporting_write_only_the_named_paths(stranger, tmp_path: Path) -> None:
    from kvlab.viz import export_html

    _, trace = stranger
    out = tmp_path / "chosen"
    out.mkdir()
    trace.config["title"] = "../../escaped-title"
    save_trace(trace, out / "warm.kvtrace")  # NOTE: warm-up (imports)
    export_html(trace, out / "warm.html")
    with writes() as seen:
        save_trace(trace, out / "copy.kvtrace")
        export_html(trace, out / "page.html", title="../../escaped-title")
    chosen = str(out.resolve())
    assert {e for e, _ in seen} == {"open", "os.rename", "os.mkdir"}
    # NOTE: export_html makes the page's folder (it exists: chosen itself)
    assert all(os.path.dirname(p) == chosen or p == chosen for _, p in seen), seen
    assert sorted(p.name for p in out.iterdir()) == ["copy.kvtrace", "page.html", "warm.html",
                                                     "warm.kvtrace"]  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chosen"]
