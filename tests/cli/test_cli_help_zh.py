"""`kvlab` help pages and click's own messages in Chinese (issue 21): every help text is in the
catalogue, `--lang zh` anywhere on the line (or KVLAB_LANG) gives Chinese help and errors, and
Chinese help fits 80 columns (kvlab.cli_i18n)."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from kvlab.cli import main
from kvlab.cli_i18n import click_message, lang_in_args, wrap
from kvlab.i18n import translations, use_language

_NO_LOCALE = {"KVLAB_LANG": None, "LANGUAGE": None, "LC_ALL": None, "LC_MESSAGES": None,
              "LANG": None}  # fmt: skip


def _commands(group: click.Group = main, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out = [(path, group)]
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out += _commands(cmd, (*path, name))
        else:
            out.append(((*path, name), cmd))
    return out


def _run(args: list[str], env: dict | None = None, width: int = 80):
    return CliRunner().invoke(main, args, prog_name="kvlab", terminal_width=width,
                              env={**_NO_LOCALE, **(env or {})})


COMMANDS = _commands()


def test_every_help_text_is_a_catalogue_message() -> None:
    zh = translations("zh")
    untranslated = []
    for path, cmd in COMMANDS:
        texts = [cmd.help, cmd.short_help] + [p.help for p in cmd.params if isinstance(p, click.Option)]
        for text in filter(None, texts):
            if zh.gettext(text) == text:
                untranslated.append((" ".join(path) or "kvlab", text))
    assert not untranslated


@pytest.mark.parametrize("path", [p for p, _c in COMMANDS], ids=lambda p: " ".join(p) or "kvlab")
def test_every_help_page_is_chinese_and_fits_80_columns(path: tuple[str, ...]) -> None:
    out = _run([*path, "--help", "--lang", "zh"])
    assert out.exit_code == 0, out.output
    text = out.output
    assert text.startswith("用法：kvlab") and "选项：" in text and "Options:" not in text
    assert "显示本帮助并退出。" in text and "Show this message" not in text
    assert max(cell_len(line) for line in text.splitlines()) <= 80, text
    cmd = dict(COMMANDS)[path]
    with use_language("zh"):
        first = translations("zh").gettext(cmd.help).split("\n\n")[0]
    assert "".join(first.split())[:20] in "".join(text.split())


@pytest.mark.parametrize("args, env", [
    (["--lang", "zh", "trace", "show", "--help"], {}),
    (["trace", "show", "--help", "--lang", "zh"], {}),
    (["trace", "show", "--lang=zh", "--help"], {}),
    (["trace", "show", "--help"], {"KVLAB_LANG": "zh"}),
    (["trace", "show", "--help"], {"LANG": "zh_CN.UTF-8"}),
])  # fmt: skip
def test_the_language_is_found_wherever_lang_is(args: list[str], env: dict) -> None:
    out = _run(args, env)
    assert out.exit_code == 0 and "显示保存的轨迹在某个事件处的状态。" in out.output, out.output


def test_english_stays_english() -> None:
    out = _run(["trace", "show", "--help"])
    assert "Usage: kvlab trace show [OPTIONS] PATH" in out.output
    assert "Show the state of a saved trace at one event." in out.output
    assert "[default: -1]" in out.output and "用法" not in out.output


def test_chinese_defaults_and_ranges() -> None:
    out = _run(["--lang", "zh", "demo", "--help"], width=100)
    assert "块池中的块数（含占位块；至少 2 个）。[默认：24; x>=2]" in out.output or (
        "块池中的块数（含占位块；至少 2 个）。[默认：24；x>=2]" in out.output), out.output


@pytest.fixture()
def trace_file(tmp_path: Path) -> Path:
    from kvlab.core import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheManager,
                            Request, SamplingParams, get_request_block_hasher, init_none_hash,
                            sha256)
    from kvlab.trace import Recorder

    init_none_hash(sha256)
    spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
    mgr = KVCacheManager(KVCacheConfig(num_blocks=6, kv_cache_tensors=[],
                                       kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)]),
                         max_model_len=64, hash_block_size=4)  # fmt: skip
    rec = Recorder().attach(mgr)
    req = Request("r0", list(range(9)), SamplingParams(max_tokens=2), None,
                  block_hasher=get_request_block_hasher(4, sha256))
    mgr.allocate_slots(req, 9)
    path = tmp_path / "t.kvtrace"
    rec.trace().save(path)
    return path


ERRORS = [
    (["--event", "x"], "错误：'--event' 的值无效：'x' 不是有效的整数。"),
    (["--event", "99"], "错误：--event 的值无效：这个轨迹有 {n} 个事件：请用 0..{last} 或 -{n}..-1"),
    (["--evnt", "3"], "错误：没有 '--evnt' 这个选项。你是不是想输入 '--event'？"),
    (["--view", "x"], "错误：'--view' 的值无效：'x' 不是 'all', 'pool', 'queue', 'table', 'hashes', "
                      "'events', 'calls' 之一。"),
    (["--request", "nobody"], "错误：--request 的值无效：这个轨迹中没有请求 'nobody'；它包含的请求有：r0"),
]  # fmt: skip


@pytest.mark.parametrize("extra, expected", ERRORS, ids=[e[0][0] for e in ERRORS])
def test_usage_errors_are_chinese(trace_file: Path, extra: list[str], expected: str) -> None:
    from kvlab.trace import load_trace

    n = len(load_trace(trace_file))
    out = _run(["--lang", "zh", "trace", "show", str(trace_file), *extra])
    assert out.exit_code == 2
    lines = out.output.strip().splitlines()
    assert lines[0] == "用法：kvlab trace show [OPTIONS] PATH"
    assert lines[1] == "运行 'kvlab trace show --help' 查看帮助。"
    assert lines[-1] == expected.format(n=n, last=n - 1)
    assert not re.search(r"Error|Invalid|Usage|No such", out.output)


@pytest.mark.parametrize("args, expected", [
    (["trace", "show"], "错误：缺少参数 'PATH'。"),
    (["trace", "show", "/no/such.kvtrace"], "错误：'PATH' 的值无效：文件 '/no/such.kvtrace' 不存在。"),
    (["trce"], "错误：没有 'trce' 这个命令。你是不是想输入 'trace'？"),
    (["demo", "--blocks", "1"], "错误：'--blocks' 的值无效：1 不在范围 x>=2 内。"),
    (["demo", "--backend", "cuda"], "错误：'--backend' 的值无效：'cuda' 不是 'auto', 'triton', 'torch' 之一。"),
])  # fmt: skip
def test_click_errors_are_chinese(args: list[str], expected: str) -> None:
    out = _run(args, {"KVLAB_LANG": "zh"})
    assert out.exit_code == 2
    assert out.output.strip().splitlines()[-1] == expected


def test_the_same_errors_stay_english_without_zh() -> None:
    out = _run(["demo", "--blocks", "1"])
    assert out.output.strip().splitlines()[-1] == (
        "Error: Invalid value for '--blocks': 1 is not in the range x>=2.")


def test_click_message_translates_known_sentences_only() -> None:
    with use_language("zh"):
        assert click_message("Invalid value for '--x': 'a' is not a valid integer.") == (
            "'--x' 的值无效：'a' 不是有效的整数。")
        assert click_message("something click never says") == "something click never says"
    with use_language("en"):
        assert click_message("Missing command.") == "Missing command."


def test_lang_in_args() -> None:
    assert lang_in_args(["trace", "--lang", "zh_CN.UTF-8"]) == "zh"
    assert lang_in_args(["--lang=en", "x", "--lang", "zh"]) == "zh"
    assert lang_in_args(["--", "--lang", "zh"]) is None
    assert lang_in_args(["--lang", "klingon"]) is None and lang_in_args(["--lang"]) is None


def test_wrap_breaks_chinese_by_width_and_keeps_punctuation_attached() -> None:
    text = "甲乙丙丁戊己，庚辛（壬癸）子丑 kvlab_identifier 寅卯。"
    for width in range(6, 30):
        lines = wrap(text, width)
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")
        for line in lines:
            assert cell_len(line) <= width or " " not in line.strip()  # only an unbreakable word overflows
            assert line[:1] not in "，。）" and line[-1:] not in "（"
    assert wrap("ab [默认：mooncake]", 8) == ["ab", "[默认：mooncake]"]


def test_a_failed_command_leaves_no_language_behind() -> None:
    """click keeps a subcommand's ``--lang`` scope open when parsing fails; collecting it later
    must not switch the process to that language (it once did, turning the next English run
    Chinese)."""
    import gc

    from kvlab.i18n import language

    before = language()
    out = _run(["demo", "--blocks", "1", "--lang", "zh"])
    assert out.exit_code == 2 and "错误" in out.output
    del out  # NOTE: the result holds the traceback, which holds click's context
    gc.collect()
    assert language() == before
    with use_language("zh"):  # NOTE: what KvlabGroup.main does around a command
        scope = use_language("zh")
        scope.__enter__()  # a subcommand's --lang: entered, never left
    del scope
    gc.collect()
    assert language() == before
    assert "Usage: kvlab demo" in _run(["demo", "--help"]).output
