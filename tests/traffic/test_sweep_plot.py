"""sweep, the hit-rate curve (matplotlib), --svg/--png, progress bars: exact values, bad input."""

import io
import json

import pytest
from click.testing import CliRunner

from kvlab.cli import main
from kvlab.traffic import (
    hit_rate_figure,
    progress_iter,
    read_mooncake_lines,
    save_figure,
    sweep,
    sweep_rows,
)

LINES = [
    '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}',
    '{"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}',
    '{"timestamp": 2, "input_length": 600, "output_length": 1, "hash_ids": [0, 3]}',
]


def _rows():
    return sweep_rows(sweep(read_mooncake_lines(LINES), ["vllm"], [1024, 4096], [512, 256]))


def test_sweep_rows_per_block_size():
    # 1024 tokens hold 2 blocks of 512 / 4 of 256: request 1 (1100 tokens) never fits there,
    # request 2 hits its first 512 tokens; at 4096 every reuse hits, as the infinite cache does.
    assert [(r["cache"], r["block_size"], r["capacity_tokens"], r["hit_tokens"], r["rejected"])
            for r in _rows()] == [
        ("infinite", 512, None, 1536, 0), ("vllm", 512, 1024, 512, 1), ("vllm", 512, 4096, 1536, 0),
        ("infinite", 256, None, 1536, 0), ("vllm", 256, 1024, 512, 1), ("vllm", 256, 4096, 1536, 0)]


def test_sweep_refuses_before_replaying():
    reqs = read_mooncake_lines(LINES)
    cases = [((["lfu"], [1024], [512]), "unknown cache 'lfu'"),
             ((["vllm"], [1024], [512, 48]), "does not divide"),
             ((["vllm"], [300], [16, 512]), r"below one block \(512 tokens\)"),
             ((["vllm"], [], [512]), "capacities_tokens is empty")]
    for args, text in cases:
        with pytest.raises(ValueError, match=text):
            sweep(reqs, *args)


def test_figure_draws_every_row():
    rows = _rows()
    ax = hit_rate_figure(rows, title="t").axes[0]
    assert ax.get_xscale() == "log" and ax.get_title() == "t"
    got = [(ln.get_label(), list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.get_lines()]
    rate = {(r["cache"], r["block_size"], r["capacity_tokens"]): r["hit_rate"] for r in rows}
    assert got == [
        ("vllm, block size 512", [1024, 4096], [rate["vllm", 512, 1024], rate["vllm", 512, 4096]]),
        # NOTE: the same hit rates at both block sizes: the second line says so (and shows)
        ("vllm, block size 256 (identical to vllm, block size 512)", [1024, 4096],
         [rate["vllm", 256, 1024], rate["vllm", 256, 4096]]),
        ("infinite cache, block size 256", [0, 1], [rate["infinite", 256, None]] * 2),
        ("infinite cache, block size 512", [0, 1], [rate["infinite", 512, None]] * 2)]
    assert rate["vllm", 512, 1024] == 512 / 2724


def test_figure_in_chinese_keeps_the_cache_names_and_numbers():
    rows = _rows()
    en, zh = hit_rate_figure(rows).axes[0], hit_rate_figure(rows, lang="zh").axes[0]
    assert (zh.get_xlabel(), zh.get_ylabel()) == ("缓存容量（token 数，对数坐标）",
                                                  "命中率（命中 token 数 / 提示词 token 数）")
    assert [ln.get_label() for ln in zh.get_lines()] == [
        "vllm，块大小 512", "vllm，块大小 256（与 vllm，块大小 512 相同）",
        "无限大缓存，块大小 256", "无限大缓存，块大小 512"]
    assert [list(ln.get_ydata()) for ln in zh.get_lines()] == [
        list(ln.get_ydata()) for ln in en.get_lines()]
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        hit_rate_figure(rows, lang="fr")


def test_figure_bad_rows():
    with pytest.raises(ValueError, match="nothing to draw"):
        hit_rate_figure([r for r in _rows() if r["cache"] == "infinite"])
    with pytest.raises(ValueError, match="missing block_size, hit_rate"):
        hit_rate_figure([{"cache": "vllm", "capacity_tokens": 5}])


def test_save_figure_atomic_and_repeatable(tmp_path):
    fig = hit_rate_figure(_rows())
    save_figure(fig, tmp_path / "a.svg")
    save_figure(fig, tmp_path / "b.svg")
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()
    assert fig._repr_svg_().encode() == (tmp_path / "a.svg").read_bytes()  # what Jupyter shows
    with pytest.raises(ValueError, match="as 'jpg'; allowed: svg, png"):
        save_figure(fig, tmp_path / "c.jpg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.svg", "b.svg"]


def test_whatif_svg_png(tmp_path):
    t = tmp_path / "t.jsonl"
    t.write_text("\n".join(LINES) + "\n")
    svg, png, out = tmp_path / "c.svg", tmp_path / "c.png", tmp_path / "r.json"
    res = CliRunner().invoke(main, ["whatif", str(t), "--capacity-tokens", "1024,4096",
                                    "--block-size", "512,256", "--json", str(out),
                                    "--svg", str(svg), "--png", str(png)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["results"] == _rows()
    assert "<!-- vllm, block size 256 (identical to vllm, block size 512) -->" in svg.read_text()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "hashing blocks" not in res.output  # NOTE: no bar when stderr is not a terminal
    res = CliRunner().invoke(main, ["whatif", str(t), "--capacity-tokens", "1024",
                                    "--svg", str(tmp_path / "no" / "c.svg"), "--json",
                                    str(tmp_path / "s.json")])  # fmt: skip
    assert res.exit_code == 2 and "folder" in res.output and "does not exist" in res.output
    assert not (tmp_path / "s.json").exists()


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_follows_tqdm_conventions():
    for progress, file, shown in ((True, io.StringIO(), True), (None, io.StringIO(), False),
                                  (None, _Terminal(), True), (False, _Terminal(), False)):
        assert list(progress_iter(range(3), progress, file=file, desc="x")) == [0, 1, 2]
        assert ("3/3" in file.getvalue()) is shown, progress
    r = range(3)
    assert progress_iter(r, False) is r
