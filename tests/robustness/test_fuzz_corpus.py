"""CI replays the fuzzing corpus (it does not fuzz): every committed input of every target gives
a result or a documented error that names the file (benchmarks/fuzz_targets.py says exactly
what is allowed). ``crash-*`` inputs are the ones a campaign once broke a reader with
(benchmarks/results/fuzz.md lists each with its fix); ``seed-*`` are the real files the
campaigns start from; the rest is what libFuzzer's merge kept for coverage."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz_corpus"
sys.path.insert(0, str(ROOT / "benchmarks"))

import fuzz_targets as ft  # noqa: E402

TARGETS = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())


def _target(name: str) -> ft.Target:
    if name == "player-js":
        import fuzz_js

        return fuzz_js.target()
    return ft.TARGETS[name]


def test_every_target_has_a_corpus() -> None:
    assert TARGETS == sorted([*ft.NAMES, "player-js"])
    for name in TARGETS:
        assert any(p.name.startswith("seed-") for p in (CORPUS / name).iterdir()), name


@pytest.mark.parametrize("name", TARGETS)
def test_corpus_replays_with_allowed_outcomes_only(name: str, tmp_path: Path) -> None:
    target, bad, slow = _target(name), [], []
    files = sorted((CORPUS / name).iterdir())
    seed = next(f for f in files if f.name.startswith("seed-"))
    ft.execute(target, seed.read_bytes(), tmp_path)  # NOTE: imports (torch, tokenizers) untimed
    for f in files:
        t0 = time.perf_counter()
        try:
            ft.execute(target, f.read_bytes(), tmp_path)
        except ft.Disallowed as finding:
            bad.append(f"{f.name}: {finding.signature}\n{finding.detail[-800:]}")
        if time.perf_counter() - t0 > 20:  # NOTE: campaigns allow 10 s on an idle core
            slow.append(f.name)
    assert bad == [] and slow == []
