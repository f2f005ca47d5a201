"""The comparison's plots: matplotlib figures, one line per policy, the same SVG bytes every run."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("matplotlib")

from kvlab.cli_hints import install_hint
from kvlab.compare import line_plot_svg, series_figure
from kvlab.compare.analyzer import compare
from kvlab.compare.workloads import Workload, WorkloadRequest

PREEMPT = Workload("p", [WorkloadRequest("r0", (1, 2, 3, 4), 3, 0, (10, 11, 12)),
                         WorkloadRequest("r1", (5, 6, 7, 8), 3, 0, (20, 21, 22))])  # fmt: skip


def test_figure_has_one_line_per_policy_with_the_series() -> None:
    c = compare(PREEMPT, pool_tokens=8, block_size=2)
    fig = c.figure("num_used_tokens")
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["vllm", "nano-vllm", "radix"]
    assert [ln.get_ydata().tolist() for ln in lines] == [
        c.series("num_used_tokens")[p].tolist() for p in ("vllm", "nano-vllm", "radix")]
    assert lines[2].get_ydata().tolist() == [8, 5, 0, 5, 0]
    assert lines[0].get_xdata().tolist() == [0, 1, 2, 3, 4]
    assert ax.get_title() == "p: num_used_tokens" and ax.get_xlabel() == "step"
    assert ax.get_ylim()[0] == 0 and ax.get_xlim()[0] == 0
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["vllm", "nano-vllm", "radix"]
    cumulative = c.figure("hit_tokens", cumulative=True).axes[0]
    assert cumulative.get_ylabel() == "cumulative hit_tokens"
    assert cumulative.get_lines()[0].get_ydata().tolist() == [0, 0, 0, 2, 2]
    with pytest.raises(KeyError, match="unknown series 'nope'"):
        c.figure("nope")


def test_to_svg_writes_the_same_bytes_every_run(tmp_path) -> None:
    first = compare(PREEMPT, pool_tokens=8, block_size=2)
    path = tmp_path / "used.svg"
    svg = first.to_svg("num_used_tokens", path=str(path))
    assert path.read_text(encoding="utf-8") == svg
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "<dc:date>" not in svg  # no date: a rerun writes the same file
    again = compare(PREEMPT, pool_tokens=8, block_size=2)  # a new run, new figure objects
    assert again.to_svg("num_used_tokens") == svg
    assert again.to_svg("num_used_tokens", cumulative=True) != svg


def test_svg_is_repeatable_across_processes() -> None:
    code = ("from kvlab.compare import line_plot_svg\n"
            "import sys; sys.stdout.write(line_plot_svg({'a': [0, 2, 4], 'b': [1, 1]}, 't'))\n")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout for _ in range(2)]  # fmt: skip
    assert runs[0] == runs[1] == line_plot_svg({"a": [0, 2, 4], "b": [1, 1]}, "t")


def test_series_figure_size_and_errors() -> None:
    fig = series_figure({"a<b": [3, 1]}, title="x & y", width=400, height=200)
    assert tuple(fig.get_size_inches()) == (4.0, 2.0) and fig.dpi == 100
    assert fig.axes[0].get_lines()[0].get_label() == "a<b"
    assert fig.axes[0].get_title() == "x & y"
    ET.fromstring(line_plot_svg({"a<b": [3, 1]}, title="x & y"))  # escaped: still valid XML
    with pytest.raises(ValueError, match="at least one non-empty series"):
        line_plot_svg({})
    with pytest.raises(ValueError, match="at least one non-empty series"):
        series_figure({"a": []})
    with pytest.raises(ValueError, match="must be finite"):
        line_plot_svg({"a": [1, float("nan")]})
    with pytest.raises(ValueError, match="at least 200 x 120 pixels, got 100 x 50"):
        series_figure({"a": [1]}, width=100, height=50)


def test_without_matplotlib_the_error_says_what_to_install() -> None:
    code = ("import sys\n"
            "class _Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'matplotlib':\n"
            "            raise ModuleNotFoundError('No module named ' + repr(name), name=name)\n"
            "sys.meta_path.insert(0, _Block())\n"
            "from kvlab.compare import line_plot_svg\n"
            "try:\n"
            "    line_plot_svg({'a': [1]})\n"
            "except ImportError as e:\n"
            "    print(e)\n")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    # The runnable command that installs the extra here (kvlab.cli_hints.install_hint).
    assert run.stdout.strip() == f"plotting a comparison needs matplotlib (the viz extra): {install_hint('viz')}"
