"""Mutation check: the boundary tests and the oracle replay catch an off-by-one in the sliding window.

vLLM 0.22.1 keeps ``cdiv(sliding_window - 1, block_size)`` blocks (the current token is in the
window). Writing ``sliding_window`` instead changes nothing when the window is a block multiple, so
tests built on such windows cannot see it. For each place the expression occurs in the code of
``kvlab/core/single_type_kv_cache_manager.py`` (found with ``tokenize``, docstrings left alone), this test
copies the ``kvlab`` package to a temporary directory, applies the one mutation there, and runs
``tests/core/test_boundaries.py`` and ``tests/oracle/test_oracle_fixtures.py`` on the mutant in a
subprocess: both files must report failures.
"""
from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TARGET = Path("kvlab/core/single_type_kv_cache_manager.py")
CHECKS = ["tests/core/test_boundaries.py", "tests/oracle/test_oracle_fixtures.py"]


def minus_one_sites(source: str) -> list[tuple[int, int, int]]:
    """(row, start col, end col) of every ``sliding_window - 1`` in code, not in strings."""
    toks = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type not in (tokenize.NL, tokenize.COMMENT)]
    sites = []
    for a, op, one in zip(toks, toks[1:], toks[2:]):
        if (a.type, a.string, op.string, one.string) == (tokenize.NAME, "sliding_window", "-", "1"):
            assert a.start[0] == one.end[0], "the expression is expected on one line"
            sites.append((a.start[0], a.start[1], one.end[1]))
    return sites


def mutate(source: str, site: tuple[int, int, int]) -> str:
    """``source`` with the expression at ``site`` replaced by ``sliding_window``."""
    row, start, end = site
    lines = source.splitlines(keepends=True)
    line = lines[row - 1]
    assert re.fullmatch(r"sliding_window\s*-\s*1", line[start:end]), line
    lines[row - 1] = line[:start] + "sliding_window" + line[end:]
    return "".join(lines)


SOURCE = (REPO / TARGET).read_text()
SITES = minus_one_sites(SOURCE)


def test_both_places_are_found():
    # The two places of vLLM's rule: the hit search (find_longest_cache_hit) and the cached
    # tail of each aligned segment. If the code moves, this test says so instead of passing.
    assert len(SITES) == 2
    assert all("sliding_window - 1" in SOURCE.splitlines()[row - 1] for row, _, _ in SITES)
    assert mutate(SOURCE, SITES[0]).count("sliding_window - 1") == SOURCE.count(
        "sliding_window - 1") - 1


def _failing_files(tmp_path: Path, site: tuple[int, int, int]) -> set[str]:
    copy = tmp_path / "mutant"
    shutil.copytree(REPO / "kvlab", copy / "kvlab",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "static"))
    (copy / TARGET).write_text(mutate(SOURCE, site))
    env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    env.pop("CI", None)  # the child's own skips are not this test's business
    where = subprocess.run(
        [sys.executable, "-c", "import kvlab.core.single_type_kv_cache_manager as m; print(m.__file__)"],
        cwd=copy, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert Path(where).resolve() == (copy / TARGET).resolve(), where
    failing = set()
    for check in CHECKS:
        # -x: the first failure is enough (the replay stops at its first fixture file).
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
             "-p", "no:randomly", "-n", "0", "-c", str(REPO / "pyproject.toml"),
             "--rootdir", str(REPO), str(REPO / check)],
            cwd=copy, env=env, capture_output=True, text=True, timeout=300,
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode in (0, 1), out[-3000:]  # 1: tests failed (not a crash)
        if proc.returncode == 1 and re.search(r"^\d+ failed", out.splitlines()[-1]):
            failing.add(check)
    return failing


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(SITES)), ids=lambda i: f"site{i}")
def test_mutant_fails_boundaries_and_oracle_replay(tmp_path, index):
    assert _failing_files(tmp_path, SITES[index]) == set(CHECKS)
