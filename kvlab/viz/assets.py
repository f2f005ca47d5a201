"""The player's JavaScript and CSS, bundled from ``kvlab/viz/static`` (no build tool, no CDN).

The sources are ES modules: ``check.js`` (refuses damaged trace data; no DOM), ``replay.js``
(decode, replay, navigation; no DOM, tested under Node), ``predict.js`` (the predict mode's stops and score; no DOM, tested under Node),
``views.js`` (drawing) and ``player.js`` (controls, ``export default {render}``).
``player_esm()`` joins them into the single module anywidget loads; ``player_script()`` makes
a classic script for static pages (no module loader needed, works from ``file://``).
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

__all__ = ["JS_SOURCES", "player_css", "player_esm", "player_script", "static_text"]

JS_SOURCES = ("i18n.js", "check.js", "replay.js", "predict.js", "views.js", "player.js")
"""Bundle order: each file only imports from the ones before it."""

_LOCAL_IMPORT = re.compile(r'^import \{[^}]*\} from "\./[a-z0-9_]+\.js";\n', re.MULTILINE)


def static_text(name: str) -> str:
    """The text of ``kvlab/viz/static/<name>``.

    Raises:
        FileNotFoundError: If there is no such file.
    """
    return (files("kvlab.viz") / "static" / name).read_text(encoding="utf-8")


@cache
def player_esm() -> str:
    """One ES module: the sources in JS_SOURCES order, their local imports removed."""
    return "\n".join(_LOCAL_IMPORT.sub("", static_text(name)) for name in JS_SOURCES)


@cache
def player_script(global_name: str = "kvlabPlayer") -> str:
    """A classic script defining ``window[global_name] = {render, loadTrace, Replayer, NAV, describe, Quiz}``.

    Raises:
        ValueError: If the sources contain ``</script`` (they could not be inlined in HTML).
    """
    body = player_esm()
    body = re.sub(r"^export default \{ render \};\n?", "", body, flags=re.MULTILINE)
    body = re.sub(r"^export (const|function|class) ", r"\1 ", body, flags=re.MULTILINE)
    if "</script" in body.lower():
        raise ValueError("the player sources contain '</script' and cannot be inlined")
    return (
        f"(function () {{\n{body}\n"
        f"window[{global_name!r}] = {{ render, loadTrace, Replayer, NAV, describe, Quiz }};\n}})();\n"
    )


@cache
def player_css() -> str:
    """The player's stylesheet."""
    return static_text("player.css")
