"""The player bundle: one module for anywidget, one classic script for pages, same colours."""

from __future__ import annotations

import re

from kvlab.viz.assets import JS_SOURCES, player_esm, player_script, static_text
from kvlab.viz.palette import GROUP_COLOURS, HIT, MISS, SHARED, STATUS_COLOURS
from kvlab.viz.snapshot import BlockStatus


def test_esm_is_one_module_without_local_imports() -> None:
    esm = player_esm()
    assert not re.search(r"^import ", esm, re.MULTILINE)
    assert esm.count("export default") == 1
    for name in JS_SOURCES:  # every source is in, in order
        first_line = static_text(name).splitlines()[0]
        assert first_line in esm
    assert (
        esm.index("export class Replayer")
        < esm.index("export function drawPool")
        < esm.index("function render(")
    )


def test_classic_script_has_no_exports() -> None:
    script = player_script()
    assert not re.search(r"^export ", script, re.MULTILINE) and "</script" not in script.lower()
    assert script.rstrip().endswith("})();")


def test_js_colours_are_the_palette() -> None:
    views = static_text("views.js")
    js = {
        name: (bg, fg)
        for name, bg, fg in re.findall(r'(\w+): \["(#[0-9a-f]{6})", "(#[0-9a-f]{6})"\]', views)
    }
    for status, colours in STATUS_COLOURS.items():
        assert js[status.value] == colours, status
    assert js["shared"] == SHARED
    assert f'hit: "{HIT}", miss: "{MISS}"' in views
    assert re.search(r"GROUP_COLOURS = \[(.*?)\]", views).group(1).replace('"', "").split(
        ", "
    ) == list(GROUP_COLOURS)
    assert set(BlockStatus) == {BlockStatus(s) for s in js if s != "shared"}
