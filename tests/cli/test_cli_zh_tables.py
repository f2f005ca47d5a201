"""`kvlab whatif --lang zh` and `kvlab compare --lang zh` (issue #11): Chinese tables and
messages with the English run's numbers; the JSON (an API) stays the same in both languages."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlab.cli import main
from kvlab.i18n import default_language, language
from kvlab.viz.compare_tables import COMPARISON_ROWS

_spec = importlib.util.spec_from_file_location(
    "_zh_checks", Path(__file__).parents[1] / "viz" / "_zh_checks.py"
)
_zh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_zh)

_NO_LOCALE = {"KVLAB_LANG": None, "LANGUAGE": None, "LC_ALL": None, "LC_MESSAGES": None,
              "LANG": None}  # fmt: skip
_TRACE = Path(__file__).parents[1] / "data" / "mooncake" / "conversation_excerpt.jsonl"


def _run(args: list[str], env: dict | None = None) -> str:
    env = {**_NO_LOCALE, "COLUMNS": "160", **(env or {})}  # rich reads COLUMNS, not click's width
    out = CliRunner().invoke(main, args, terminal_width=160, env=env)
    assert out.exit_code == 0, out.output
    return out.output


def _whatif(tmp_path: Path, lang: str | None, *extra: str) -> tuple[str, dict]:
    json_out = tmp_path / f"{lang}.json"
    args = ["whatif", str(_TRACE), "--capacity-tokens", "1e5,1e6", "--caches", "vllm,radix",
            "--top-prefixes", "2", "--no-progress", "--json", str(json_out), *extra]  # fmt: skip
    if lang is not None:
        args += ["--lang", lang]
    out = _run(args)
    return out.replace(str(json_out), "OUT.json"), json.loads(json_out.read_text())


def test_whatif_in_chinese_has_the_english_numbers_and_the_same_json(tmp_path: Path) -> None:
    en, en_json = _whatif(tmp_path, None)
    zh, zh_json = _whatif(tmp_path, "zh")
    assert "hit rate" in en and "most reused prefixes (block size 512)" in en
    assert _zh.english_left(en), "the English table holds catalogue phrases"
    assert _zh.english_left(zh) == []
    assert _zh.numbers(zh) == _zh.numbers(en)
    for label in ("缓存", "块大小", "容量（token", "命中率", "命中 token 数", "驱逐的块", "拒绝",
                  "复用最多的前缀（块大小 512）", "复用次数", "首个请求",
                  "conversation_excerpt.jsonl：300 个请求，块大小 512"):  # fmt: skip
        assert label in zh, label
    # the rows: same caches, same figures, in the same order
    rows = [line for line in en.splitlines() if line.startswith("│ ")]
    assert [r.split() for r in rows] == [
        r.split() for r in zh.splitlines() if r.startswith("│ ")
    ]
    assert "│ vllm │ 512 │ 100,000 │ 0.036 │ 152,064 │ 7,267 │ 2 │" in " ".join(en.split())
    assert zh_json == en_json  # JSON keys and values are an API: not translated
    assert {"cache", "capacity_tokens", "hit_rate", "hit_tokens"} <= set(en_json["results"][0])
    assert language() == default_language()  # --lang did not outlive the command


def test_whatif_language_from_the_environment_and_english_unchanged(tmp_path: Path) -> None:
    args = ["whatif", str(_TRACE), "--capacity-tokens", "1e5", "--limit", "20", "--no-progress"]
    en = _run(args)
    assert _run(args, {"LANG": "zh_CN.UTF-8"}) == _run([*args, "--lang", "zh"])
    assert _run([*args, "--lang", "en"], {"KVLAB_LANG": "zh"}) == en
    assert en.splitlines()[0].strip() == "conversation_excerpt.jsonl: 20 requests, block size 512"


def test_whatif_explain_and_save_in_chinese(tmp_path: Path) -> None:
    save = tmp_path / "run.kvtrace"
    args = ["whatif", str(_TRACE), "--capacity-tokens", "1e5", "--limit", "20", "--no-progress",
            "--trace-at", "1e5", "--explain", "3", "--save", str(save)]  # fmt: skip
    en = _run(args)
    zh = _run([*args, "--lang", "zh"])
    assert "vLLM at 100,000 tokens, block size 512:" in en
    assert "request 3 (mc-3): hit 512 of 2,290 prompt tokens" in en
    assert "vLLM，容量 100,000 token，块大小 512：" in zh
    assert "请求 3（mc-3）：2,290 个提示词 token 命中 512 个" in zh
    # the command as this shell runs it: kvlab, or the script's path (tests/docs runs it)
    assert re.search(rf"查看：\S*kvlab trace show {re.escape(str(save))}", zh), zh
    assert "个事件，每个请求一步" in zh
    assert _zh.english_left(zh) == []
    assert _zh.numbers(zh) == _zh.numbers(en)


def test_whatif_rejected_request_explained_in_chinese() -> None:
    args = ["whatif", str(_TRACE), "--capacity-tokens", "1e5", "--limit", "20", "--no-progress",
            "--trace-at", "600", "--explain", "3"]  # fmt: skip
    en = _run(args)
    zh = _run([*args, "--lang", "zh"])
    assert "rejected: it needs 5 blocks, the pool has 1, so the lookup below went unused" in en
    assert "被拒绝：它需要 5 个块，而块池只有 1 个" in zh
    assert _zh.english_left(zh) == []
    assert _zh.numbers(zh) == _zh.numbers(en)


@pytest.mark.parametrize("workload", ["rag", "system-prompt"])
def test_compare_in_chinese_has_the_english_numbers(workload: str, tmp_path: Path) -> None:
    args = ["compare", workload, "--requests", "6", "--pool-tokens", "512", "--per-request"]
    en = _run([*args, "--json", str(tmp_path / "en.json")]).replace(str(tmp_path), "T")
    zh = _run([*args, "--json", str(tmp_path / "zh.json"), "--lang", "zh"]).replace(
        str(tmp_path), "T")
    assert "prefix caches side by side" in en and "peak cached content (tokens)" in en
    assert _zh.english_left(en), "the English table holds catalogue phrases"
    assert _zh.english_left(zh) == []
    assert _zh.numbers(zh) == _zh.numbers(en)
    assert "前缀缓存对照" in zh and "指标" in zh and "逐个请求" in zh and "写入 T/zh.json" in zh
    assert all(label in zh for label in ("前缀缓存命中（token 数）", "抢占次数", "被拒绝的请求"))
    assert len(COMPARISON_ROWS) == 12
    # each metric row: the same figures under the same caches
    en_rows = [line.split("│")[2:] for line in en.splitlines() if line.startswith("│ ")]
    zh_rows = [line.split("│")[2:] for line in zh.splitlines() if line.startswith("│ ")]
    assert [[c.strip() for c in r] for r in en_rows] == [[c.strip() for c in r] for r in zh_rows]
    assert json.loads((tmp_path / "en.json").read_text()) == json.loads(
        (tmp_path / "zh.json").read_text())


def test_compare_group_option_equals_command_option() -> None:
    args = ["compare", "rag", "--requests", "4", "--pool-tokens", "512"]
    assert _run(["--lang", "zh", *args]) == _run([*args, "--lang", "zh"])
    assert _run(args, {"KVLAB_LANG": "zh"}) == _run([*args, "--lang", "zh"])


def test_compare_tables_take_a_lang() -> None:
    from kvlab.compare import Workload, WorkloadRequest, compare
    from kvlab.viz.compare_tables import render_comparison_table, render_request_table
    from kvlab.viz.terminal import to_text

    w = Workload("p", [WorkloadRequest("r0", (1, 2, 3, 4), 3, 0, (10, 11, 12)),
                       WorkloadRequest("r1", (5, 6, 7, 8), 3, 0, (20, 21, 22))])  # fmt: skip
    c = compare(w, pool_tokens=8, block_size=2)
    zh = to_text(render_comparison_table(c, lang="zh"), width=120)
    en = to_text(render_comparison_table(c), width=120)
    row = next(ln for ln in zh.splitlines() if "驱逐（token 数）" in ln)
    assert [cell.strip() for cell in row.split("│")[2:-1]] == ["6", "6", "10"]
    assert "2 个请求，8 个提示词 token · 池容量 8 token" in zh
    assert _zh.english_left(zh) == [] and _zh.numbers(zh) == _zh.numbers(en)
    req = to_text(render_request_table(c, max_rows=1, lang="zh"), width=120)
    assert "另有 1 个请求未显示" in req and "r0" in req and "r1" not in req
    assert "1 more requests not shown" in to_text(render_request_table(c, max_rows=1), width=120)
    with pytest.raises(ValueError, match="en, zh"):
        render_comparison_table(c, lang="fr")


def test_whatif_model_and_fleet_tables_in_chinese(tmp_path: Path) -> None:
    """traffic2's options (--model-config, --replicas, --routing, --warmup): the model and fleet
    tables are Chinese with the English run's numbers, and the JSON is the same."""
    for extra, labels in (
        (["--model-config", "llama-3.1-8b", "--kv-cache-memory", "1GiB", "--max-model-len",
          "4096", "--warmup", "0.5"],
         ("模型", "KV 缓存（GiB）", "组数", "无限大缓存", "300 个请求，模型 llama-3.1-8b")),
        (["--capacity-tokens", "1e5", "--replicas", "2", "--routing", "round-robin,session"],
         ("2 个副本", "路由策略", "副本数", "每个副本的容量（token 数）", "所有副本合成一池",
          "路由损失的命中", "最忙副本负载 / 平均负载")),
    ):  # fmt: skip
        args = ["whatif", str(_TRACE), "--no-progress", *extra]
        en = _run([*args, "--json", str(tmp_path / "en.json")]).replace(str(tmp_path), "T")
        zh = _run([*args, "--json", str(tmp_path / "zh.json"), "--lang", "zh"]).replace(
            str(tmp_path), "T")
        assert _zh.english_left(en), "the English tables hold catalogue phrases"
        assert _zh.english_left(zh) == [], zh
        assert _zh.numbers(zh) == _zh.numbers(en)
        for label in labels:
            assert label in zh, label
        assert json.loads((tmp_path / "en.json").read_text()) == json.loads(
            (tmp_path / "zh.json").read_text())


@pytest.mark.parametrize("extra, expected", [
    (["--capacity-tokens", "1e5", "--replicas", "2", "--routing", "best"],
     "错误：--routing 的值无效：未知的路由策略 'best'；允许的有：round-robin, random, session, "
     "prefix-aware, least-loaded"),
    (["--capacity-tokens", "1e5", "--policies", "belady2"],
     "错误：--policies 的值无效：未知的驱逐策略 'belady2'；允许的有：fifo, lru, s3fifo, sieve, arc, "
     "clock, lirs, twoq, lfu"),
    ([], "错误：块池大小要么以 token 数给出（--capacity-tokens 1e5,1e6），要么按模型以字节给出"
         "（--model-config NAME --kv-cache-memory 16GiB），二者选一"),
    (["--capacity-tokens", "1e5", "--gpu-memory", "80GiB"],
     "错误：--kv-cache-memory、--gpu-memory 和 --weights 用来按模型估算块池：请加上 --model-config NAME"),
    (["--capacity-tokens", "1e5", "--warmup", "1"],
     "错误：'--warmup' 的值无效：1.0 不在范围 0<=x<1 内。"),
])  # fmt: skip
def test_whatif_new_option_errors_in_chinese(extra: list[str], expected: str) -> None:
    args = ["whatif", str(_TRACE), "--no-progress", *extra]
    en = CliRunner().invoke(main, args, env=_NO_LOCALE)
    zh = CliRunner().invoke(main, [*args, "--lang", "zh"], env=_NO_LOCALE)
    assert en.exit_code == zh.exit_code == 2, zh.output
    assert zh.output.strip().splitlines()[-1] == expected
    assert "Error" not in zh.output and _zh.english_left(zh.output) == []
    assert en.output.strip().splitlines()[-1].startswith("Error: ")


def test_whatif_curve_in_chinese(tmp_path: Path) -> None:
    """--svg with --lang zh: the curve's title, axes and legend are Chinese (cache names and
    numbers as in English); without --lang the SVG is English."""
    args = ["whatif", str(_TRACE), "--capacity-tokens", "1e5,1e6", "--limit", "20",
            "--no-progress"]  # fmt: skip
    _run([*args, "--svg", str(tmp_path / "en.svg")])
    _run([*args, "--svg", str(tmp_path / "zh.svg"), "--lang", "zh"])
    en, zh = (tmp_path / "en.svg").read_text(), (tmp_path / "zh.svg").read_text()
    for text in ("conversation_excerpt.jsonl: 20 requests, block size 512",
                 "cache capacity (tokens, log scale)", "vllm, block size 512"):  # fmt: skip
        assert f"<!-- {text} -->" in en and f"<!-- {text} -->" not in zh, text
    for text in ("conversation_excerpt.jsonl：20 个请求，块大小 512",
                 "缓存容量（token 数，对数坐标）", "vllm，块大小 512", "无限大缓存，块大小 512"):  # fmt: skip
        assert f"<!-- {text} -->" in zh, text


def test_whatif_help_texts_name_every_choice() -> None:
    """The help texts write their choices out (a catalogue message cannot hold an f-string):
    each still names every choice the option accepts."""
    from kvlab.cli_checks import CACHES_HELP
    from kvlab.traffic.peer_policies import POLICIES
    from kvlab.traffic.sizing import BUNDLED_MODELS
    from kvlab.whatif_cli import _BOUNDS, _FORMATS, _ROUTINGS, whatif

    helps = {p.name: p.help for p in whatif.params if hasattr(p, "help")}
    assert helps["fmt"] == f"Trace format: {', '.join(_FORMATS)}."
    assert helps["caches"] == f"Comma-separated, of {CACHES_HELP}, {', '.join(_BOUNDS)}."
    assert helps["routing"].startswith(f"Comma-separated, of {', '.join(_ROUTINGS)} (")
    assert f"({', '.join(POLICIES)};" in helps["policies"]
    listed = helps["model_config"].split("config.json, or ")[1].rstrip(").")
    assert sorted(listed.split(", ")) == sorted(BUNDLED_MODELS)
