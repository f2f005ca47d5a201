"""Bad-input campaign through the CLI: every damaged trace and bad JSONL of the reader campaigns,
given to the ``kvlab`` commands that read it, ends in one clean ``Error:`` line carrying the
reader's message (what is allowed), exit status 1, no traceback, no output file written.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import test_campaign_trace as tr
import test_campaign_workloads as wl
from click.testing import CliRunner

from kvlab.cli import main

TRACE_COMMANDS = [["trace", "info"], ["trace", "show"], ["compare"]]


def _error_line(result) -> str:
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    lines = [ln for ln in result.output.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, result.output
    return lines[0]


def _run(args: list[str], tmp_path: Path) -> str:
    json_out = tmp_path / "out.json"
    extra = ["--json", str(json_out)] if args[0] == "compare" else []
    result = CliRunner().invoke(main, args + extra)
    assert result.exit_code == 1, result.output
    assert not json_out.exists()
    return _error_line(result)


@pytest.mark.parametrize("command", TRACE_COMMANDS, ids=" ".join)
@pytest.mark.parametrize(("edit", "allowed"), [r[1:] for r in tr.FILE_ROWS],
                         ids=[r[0] for r in tr.FILE_ROWS])  # fmt: skip
def test_damaged_trace_files_through_the_cli(tr_good, tmp_path, command, edit, allowed) -> None:
    header, arrays = tr._read(tr_good)
    edit(header, arrays)
    bad = tmp_path / "bad.kvtrace"
    tr._write(bad, header, arrays)
    line = _run([*command, str(bad)], tmp_path)
    assert re.search(allowed, line), line


@pytest.mark.parametrize("command", TRACE_COMMANDS, ids=" ".join)
@pytest.mark.parametrize(("damage", "allowed"), [r[1:] for r in tr.ZIP_ROWS],
                         ids=[r[0] for r in tr.ZIP_ROWS])  # fmt: skip
def test_damaged_trace_zips_through_the_cli(tr_good, tmp_path, command, damage, allowed) -> None:
    bad = tmp_path / "bad.kvtrace"
    damage(tr_good, bad)
    line = _run([*command, str(bad)], tmp_path)
    assert re.search(allowed, line), line


@pytest.mark.parametrize(("lines", "allowed"), [r[1:] for r in wl.ROWS],
                         ids=[r[0] for r in wl.ROWS])  # fmt: skip
def test_bad_jsonl_through_compare(tmp_path, lines, allowed) -> None:
    path = tmp_path / "bad.jsonl"
    body = ([wl.GOOD] if lines and lines[0].strip() else []) + lines
    path.write_text("\n".join(body) + "\n" if lines else "")
    line = _run(["compare", str(path)], tmp_path)
    assert re.search(allowed, line), line


@pytest.fixture(scope="module")
def tr_good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path, _ = tr.build_good(tmp_path_factory.mktemp("cli"))
    return path
