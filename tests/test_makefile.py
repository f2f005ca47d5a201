"""`make demo` / `make test` show their set-up: numbered steps and pip's progress, never -q."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("target", ["demo", "test"])
def test_setup_shows_progress(target: str) -> None:
    if shutil.which("make") is None:
        pytest.fail("make is needed to check the Makefile")
    # -n: print the commands without running them; -B: as on a fresh machine (no stamp yet)
    # Run as a top-level make even when pytest itself runs under `make test` (as CI does): a
    # sub-make inherits MAKELEVEL/MAKEFLAGS and prints "make[1]: Entering/Leaving directory".
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    run = subprocess.run(["make", "--no-print-directory", "-n", "-B", target,
                          "VENV=/nonexistent-venv"],
                         cwd=REPO, capture_output=True, text=True, check=True, env=env)
    lines = run.stdout.splitlines()
    pip = [ln for ln in lines if " -m pip install" in ln]
    assert len(pip) == 3, lines
    assert not any(" -q" in ln or "--quiet" in ln for ln in pip), pip
    steps = [ln for ln in lines if ln.startswith('echo "==> [')]
    assert [s.split("]")[0][-3:] for s in steps] == ["1/5", "2/5", "3/5", "4/5", "5/5"]
    assert lines[-1].startswith("/nonexistent-venv/bin/")
