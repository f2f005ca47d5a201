"""The playground page in Chinese: every label its JavaScript shows is a catalogue message.

Every ``t("...")`` of ``kvlab/playground/static/playground.js`` names its English text
literally and is a PLAYGROUND_STRINGS entry (none stale), which the Chinese catalogue
translates; the page embeds both languages, and the presets' titles and descriptions.
"""

from __future__ import annotations

import json
import re
from importlib.resources import files

from kvlab.i18n import use_language
from kvlab.playground import PRESETS
from kvlab.playground.build import page_data
from kvlab.playground.strings import PLAYGROUND_STRINGS, playground_strings

LITERAL = r'"((?:[^"\\]|\\.)*)"'
T_CALL = re.compile(r"(?<![\w.])t\(")
T_LITERAL = re.compile(rf"(?<![\w.])t\(\s*{LITERAL}")
CJK = re.compile(r"[\u4e00-\u9fff]")


def js_keys() -> list[str]:
    source = (files("kvlab.playground") / "static" / "playground.js").read_text(encoding="utf-8")
    found = [json.loads(f'"{m}"') for m in T_LITERAL.findall(source)]
    # the definition `function t(message, values)` is the one call that is not a lookup
    assert len(T_CALL.findall(source)) == len(found) + 1
    return list(dict.fromkeys(found))


def test_every_label_is_listed_and_translated() -> None:
    keys = js_keys()
    assert set(keys) == set(PLAYGROUND_STRINGS) and len(PLAYGROUND_STRINGS) == len(
        set(PLAYGROUND_STRINGS)
    )
    zh = playground_strings("zh")
    assert playground_strings("en") == {}
    for key in keys:
        assert CJK.search(zh[key]), key
        assert set(re.findall(r"\{\w+\}", zh[key])) == set(re.findall(r"\{\w+\}", key)), key


def test_the_page_embeds_both_languages_and_the_presets() -> None:
    data = page_data()
    assert data["strings"]["zh"]["Run"] == "运行"
    assert data["player_labels"]["en"] == {} and data["player_labels"]["zh"]
    assert list(data["presets"]) == list(PRESETS)
    nb03 = data["presets"]["nb03"]
    with use_language("zh"):
        assert CJK.search(nb03["title"]["zh"]) and CJK.search(nb03["description"]["zh"])
    assert nb03["title"]["en"] == PRESETS["nb03"].title
    assert nb03["scenario"] == PRESETS["nb03"].scenario
