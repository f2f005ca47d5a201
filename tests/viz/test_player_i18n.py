"""The trace player in Chinese: its labels are catalogue messages, sent as a {english: zh} dict.

* Every label the JavaScript looks up (``tr("...")`` / ``trn("...", "...", n)`` in
  ``kvlab/viz/static``) is a PLAYER_STRINGS entry, hence a catalogue msgid, with a Chinese
  translation; and every entry is used.
* ``TracePlayer(lang=...)`` / ``export_html(lang=...)`` send ``player_labels(lang)`` and ask the
  predict mode's questions in that language (same decisions, same answers); None = the current
  language (``use_language``, else ``KVLAB_LANG`` / ``LANG``); anything but en / zh is refused.
* ``node --test tests/viz/js/i18n.test.mjs``: the JavaScript lookup returns the Chinese labels.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import traitlets
from babel.messages.pofile import read_po

from kvlab.i18n import LOCALE_DIR, use_language
from kvlab.trace import Trace
from kvlab.viz import TracePlayer, export_html, player_html, quiz_points
from kvlab.viz.assets import static_text
from kvlab.viz.player_strings import PLAYER_STRINGS, player_labels

NODE = shutil.which("node")
TEST_FILE = Path(__file__).parent / "js" / "i18n.test.mjs"
CJK = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]")  # Chinese or its punctuation
LITERAL = r'"((?:[^"\\]|\\.)*)"'
TR = re.compile(rf"\btr\(\s*{LITERAL}")
TRN = re.compile(rf"\btrn\(\s*{LITERAL}\s*,\s*{LITERAL}")
CALL = re.compile(r"\btrn?\(")


def js_label_keys() -> list[str]:
    """The English labels the player's JavaScript looks up, in source order."""
    keys: list[str] = []
    for name in ("player.js", "views.js", "predict.js", "replay.js"):
        source = static_text(name)
        found = [m.group(1) for m in TR.finditer(source)]
        pairs = TRN.findall(source)
        # every lookup names its English text literally (no template, no variable)
        assert len(CALL.findall(source)) == len(found) + len(pairs), name
        keys += found + [form for pair in pairs for form in pair]
    return [json.loads(f'"{k}"') for k in dict.fromkeys(keys)]


def test_every_js_label_is_a_catalogue_message_with_chinese() -> None:
    keys = js_label_keys()
    assert len(keys) == 102
    assert set(keys) == set(PLAYER_STRINGS)  # listed for extraction, none stale
    assert len(PLAYER_STRINGS) == len(set(PLAYER_STRINGS))
    with (LOCALE_DIR / "zh" / "LC_MESSAGES" / "kvlab.po").open("rb") as f:
        po = {}
        for m in read_po(f):
            if not m.id:
                continue
            ids, strings = (m.id, m.string) if isinstance(m.id, tuple) else ((m.id,), (m.string,))
            po.update(dict.fromkeys(ids, strings[0]))  # a plural entry: both forms, one Chinese form
    zh = player_labels("zh")
    assert set(zh) == set(keys)
    for key in keys:
        assert po.get(key), f"not in the Chinese catalogue: {key!r}"
        assert zh[key] == po[key] != key
        assert CJK.search(zh[key]), (key, zh[key])
    assert zh["free, cached: evictable"] == "空闲、已缓存：可驱逐"
    assert zh["BlockPool · {n} blocks · {free} in the free queue"] == (
        "BlockPool · {n} 个块 · 空闲队列中 {free} 个"
    )


def test_english_sends_no_labels_and_languages_are_checked() -> None:
    assert player_labels("en") == {} == player_labels("en_US.UTF-8")
    assert player_labels("zh_CN.UTF-8") == player_labels("zh")
    with use_language("zh"):
        assert player_labels() == player_labels("zh")
    with use_language("en"):
        assert player_labels() == {}
    with pytest.raises(ValueError, match="en, zh"):
        player_labels("fr")


def _page_state(page: str) -> dict:
    found = re.search(r'<script type="application/json" data-kvlab-player="[^"]+">(.*?)</script>',
                      page, re.DOTALL)  # fmt: skip
    assert found
    return json.loads(found.group(1))


def test_export_html_in_chinese(shared: Trace, tmp_path: Path) -> None:
    kinds = ("popleft", "evict", "hit")
    en = quiz_points(shared, kinds)
    with use_language("zh"):
        zh = quiz_points(shared, kinds)
    page = export_html(shared, tmp_path / "zh.html", lang="zh", predict=kinds).read_text("utf-8")
    assert '<html lang="zh-Hans">' in page
    assert "<title>kvlab 事件轨迹</title>" in page
    state = _page_state(page)
    assert state["lang"] == "zh" and state["labels"] == player_labels("zh")
    assert state["quiz"] == [p.to_dict() for p in zh]
    # same decisions and answers as in English; the words are Chinese
    assert [(p.kind, p.ask, p.reveal, p.values, p.answer) for p in zh] == [
        (p.kind, p.ask, p.reveal, p.values, p.answer) for p in en
    ]
    assert all(CJK.search(p.question) and CJK.search(p.explanation) for p in zh)
    assert zh[0].question == (
        "get_computed_blocks（请求 'a'）：共 10 个 token，2 个满块已计算哈希（每块 4 个 token）。"
        "有多少个 token 命中前缀缓存（num_new_computed_tokens）？"
    )
    assert zh[0].choices == ("0 个 token", "8 个 token", "9 个 token", "10 个 token")
    assert zh[1].question == (
        "allocate_slots（请求 'a'）需要 3 个新块：get_new_blocks 对空闲队列（9 个空闲块）调用 "
        "popleft_n(3)。它会依次取走哪些块？"
    )
    english = export_html(shared, tmp_path / "en.html", lang="en").read_text("utf-8")
    assert '<html lang="en">' in english and "<title>kvlab trace</title>" in english
    assert _page_state(english)["labels"] == {}


def test_export_html_language_default_and_errors(
    shared: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVLAB_LANG", "zh")
    state = _page_state(export_html(shared, tmp_path / "env.html").read_text("utf-8"))
    assert state["lang"] == "zh" and state["labels"] == player_labels("zh")
    with use_language("en"):  # the current language wins over the environment
        assert _page_state(player_html(shared))["labels"] == {}
    monkeypatch.setenv("KVLAB_LANG", "en")
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert _page_state(player_html(shared))["lang"] == "en"
    monkeypatch.delenv("KVLAB_LANG")
    assert _page_state(player_html(shared))["lang"] == "zh"  # LANG decides
    for bad in ("fr", "zh_TW", 3):
        with pytest.raises(ValueError, match="en, zh"):
            export_html(shared, tmp_path / "bad.html", lang=bad)
    assert not (tmp_path / "bad.html").exists()


def test_trace_player_in_chinese(shared: Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KVLAB_LANG", raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    player = TracePlayer(shared, lang="zh_CN.UTF-8", predict=("hit",))
    assert player.lang == "zh" and player.labels == player_labels("zh")
    with use_language("zh"):
        assert player.quiz == [p.to_dict() for p in quiz_points(shared, ("hit",))]
    player.lang = "en"  # the labels and questions follow
    assert player.labels == {}
    assert player.quiz == [p.to_dict() for p in quiz_points(shared, ("hit",))]
    assert TracePlayer(shared).lang == "en"  # the environment: C.UTF-8
    monkeypatch.setenv("KVLAB_LANG", "zh")
    assert TracePlayer(shared).labels == player_labels("zh")
    with pytest.raises(traitlets.TraitError, match="en, zh"):
        TracePlayer(shared, lang="de")
    with pytest.raises(traitlets.TraitError, match="en, zh"):
        player.lang = "ja"
    assert player.lang == "en" and player.labels == {}


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_js_lookup_returns_chinese(tmp_path: Path) -> None:
    fixture = tmp_path / "labels.json"
    fixture.write_text(json.dumps({"zh": player_labels("zh"), "keys": js_label_keys()}))
    proc = subprocess.run(
        [NODE, "--test", str(TEST_FILE)],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "KVLAB_LABELS_FIXTURE": str(fixture)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "# fail 0" in proc.stdout and "# pass 4" in proc.stdout, proc.stdout[-2000:]
