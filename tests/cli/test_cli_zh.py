"""`kvlab --lang zh` / `kvlab COMMAND --lang zh` (issue #11): Chinese views and messages, the
environment's default, a clear usage error for other languages, and the Chinese demo end to end."""

from __future__ import annotations

import importlib.util
import re
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlab.cli import main
from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SamplingParams,
    get_request_block_hasher,
    init_none_hash,
    sha256,
)
from kvlab.demo import PROMPTS, DemoConfig
from kvlab.i18n import default_language, language
from kvlab.trace import Recorder, load_trace

_spec = importlib.util.spec_from_file_location(
    "_zh_checks", Path(__file__).parents[1] / "viz" / "_zh_checks.py"
)
_zh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_zh)

_NO_LOCALE = {"KVLAB_LANG": None, "LANGUAGE": None, "LC_ALL": None, "LC_MESSAGES": None,
              "LANG": None}  # fmt: skip


@pytest.fixture()
def saved_trace(tmp_path: Path) -> Path:
    """Two requests sharing a 2-block prefix on a 6-block pool, both freed."""
    init_none_hash(sha256)
    spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
    mgr = KVCacheManager(KVCacheConfig(num_blocks=6, kv_cache_tensors=[],
                                       kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)]),
                         max_model_len=64, hash_block_size=4)  # fmt: skip
    rec = Recorder().attach(mgr)
    hasher = get_request_block_hasher(4, sha256)
    reqs = [Request(f"r{i}", list(range(8)) + [20 + i] * 3, SamplingParams(max_tokens=2), None,
                    block_hasher=hasher) for i in range(2)]  # fmt: skip
    for step, req in enumerate(reqs):
        rec.mark_step(step)
        blocks, hit = mgr.get_computed_blocks(req)
        mgr.allocate_slots(req, req.num_tokens - hit, hit, blocks)
    for req in reqs:
        mgr.free(req)
    path = tmp_path / "two.kvtrace"
    rec.trace().save(path)
    return path


def _show(args: list[str], env: dict | None = None) -> str:
    out = CliRunner().invoke(main, args, terminal_width=120, env={**_NO_LOCALE, **(env or {})})
    assert out.exit_code == 0, out.output
    return out.output


@pytest.mark.parametrize("event", ["1", "5", "-1"])
def test_trace_show_in_chinese_has_the_english_numbers(saved_trace: Path, event: str) -> None:
    en = _show(["trace", "show", str(saved_trace), "--event", event])
    zh = _show(["trace", "show", str(saved_trace), "--event", event, "--lang", "zh"])
    assert _zh.english_left(en), "the English render holds catalogue phrases"
    assert _zh.english_left(zh) == []
    body, legend = zh.split("事件类型：\n")  # the kinds' meanings: only the Chinese render has them
    assert _zh.numbers(body) == _zh.numbers(en)
    assert legend.strip() and all(re.match(r"  [A-Z_]+：\S", ln) for ln in legend.splitlines())
    assert "空闲队列 free_block_queue" in zh and "最先驱逐" in zh and "哈希链" in zh
    assert language() == default_language()  # the command's --lang did not outlive it


def test_the_language_comes_from_the_group_option_or_the_environment(saved_trace: Path) -> None:
    args = ["trace", "show", str(saved_trace), "--view", "queue"]
    zh = _show(["--lang", "zh", *args])
    assert "空闲队列" in zh
    assert _show(args, {"KVLAB_LANG": "zh"}) == zh
    assert _show(args, {"LANG": "zh_CN.UTF-8"}) == zh
    assert _show(args, {"LANG": "de_DE.UTF-8"}) == _show(args)  # no German catalogue: English
    assert _show([*args, "--lang", "en"], {"LANG": "zh_CN.UTF-8"}) == _show(args)  # option wins
    assert _show(["--lang", "zh", *args, "--lang", "en"]) == _show(args)
    info = _show(["trace", "info", str(saved_trace), "--lang", "zh"])
    assert "事件类型" in info and "调用：" in info and "allocate_slots ×2" in info


@pytest.mark.parametrize(
    "args",
    [
        ["--lang", "fr", "trace", "info", "x"],
        ["trace", "info", "x", "--lang", "zh_TW"],
        ["demo", "--lang", "english"],
    ],
)
def test_an_unknown_language_is_a_usage_error_naming_en_and_zh(args: list[str]) -> None:
    out = CliRunner().invoke(main, args, env=_NO_LOCALE)
    assert out.exit_code == 2, out.output
    assert "--lang" in out.output and "en, zh" in out.output


def test_an_invalid_kvlab_lang_is_a_usage_error(saved_trace: Path) -> None:
    out = CliRunner().invoke(
        main, ["trace", "info", str(saved_trace)], env={**_NO_LOCALE, "KVLAB_LANG": "klingon"}
    )
    assert out.exit_code == 2 and "KVLAB_LANG" in out.output and "en, zh" in out.output


def test_the_chinese_prompts_share_a_chinese_system_prompt() -> None:
    zh = PROMPTS["zh"]
    assert "你是 KV" in zh.system and all("。" in p or "：" in p for p in zh.burst)
    assert [len(x) for x in (zh.shared_questions, zh.chat_turns, zh.burst)] == [
        len(x)
        for x in (PROMPTS["en"].shared_questions, PROMPTS["en"].chat_turns, PROMPTS["en"].burst)
    ]
    assert DemoConfig(lang="zh_CN.UTF-8").lang == "zh"
    with pytest.raises(ValueError, match="en, zh"):
        DemoConfig(lang="fr")


@pytest.mark.model
@pytest.mark.slow
def test_demo_in_chinese_end_to_end(tmp_path: Path) -> None:
    out = CliRunner().invoke(
        main,
        ["demo", "--quick", "--lang", "zh", "--out", str(tmp_path)],
        terminal_width=120,
        env=_NO_LOCALE,
    )
    assert out.exit_code == 0, out.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["config"]["lang"] == "zh"
    shared = [r for r in summary["requests"] if r["act"] == "shared prompt"]
    assert len(shared) == 2
    # the Chinese system prompt is about 130 tokens: its 8 full blocks (of 16) hit
    assert shared[0]["cached_tokens"] == 0 and shared[1]["cached_tokens"] >= 8 * 16
    assert summary["counts"]["lookup_hits"] > 0 and summary["counts"]["blocks_touched"] >= 8
    trace = load_trace(tmp_path / "demo.kvtrace")
    assert trace.check_replay() == trace.final_state()
    for label in ("请求（前缀缓存命中按首次调度时统计）", "共享提示词", "KV 缓存管理器做了什么",
                  "结束时的 LRU 空闲队列", "空闲队列 free_block_queue", "共享提示词请求的哈希链",
                  "由前缀缓存提供的提示词 token",
                  "SmolLM2-135M 很小：回答质量不高，中文尤其差；这里要看的是 KV 缓存"):  # fmt: skip
        assert label in out.output, label
    report = out.output.split("KV 缓存管理器做了什么", 1)[1]  # past the model's own text
    assert _zh.english_left(report) == []


@pytest.mark.model
def test_generate_in_chinese_shows_the_block_table(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["generate", "法国的首都是", "--no-chat", "--max-tokens", "2",
                                    "--lang", "zh"], terminal_width=120, env=_NO_LOCALE)  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "req-0 的块列表（" in out.output and "block_size 16" in out.output
    assert "逻辑块i存放从第i·16个起的16个token" in "".join(out.output.split()) and "空闲、无内容" in out.output
    assert _zh.english_left(out.output.split("·", 1)[1]) == []  # past the model's own text
