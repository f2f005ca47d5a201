"""export_html: one self-contained HTML page that plays a trace (no kernel, no network).

The page inlines the player's CSS and JavaScript (the same code the TracePlayer widget runs)
and the trace in compact form; a twenty-line model stand-in plays the part of the widget
model (``get`` / ``set`` / ``on`` / ``off`` / ``save_changes``). It opens from ``file://``
and loads nothing else: no CDN, no fonts, no require.js. ``lang`` (``en`` / ``zh``; default: the
current language, ``kvlab.i18n.language()``) picks the labels and the predict mode's questions.

Examples:
    >>> export_html(trace, "report/trace.html", title="two requests share a prefix")  # doctest: +SKIP
    PosixPath('report/trace.html')
"""

from __future__ import annotations

import html
import json
from os import PathLike
from pathlib import Path
from typing import Any

from kvlab.i18n import N_, check_language, language, translations, use_language
from kvlab.trace.untrusted import shown
from kvlab.viz.assets import player_css, player_script
from kvlab.viz.encode import encode_trace
from kvlab.viz.player_strings import player_labels
from kvlab.viz.predict import check_predict_kinds, quiz_points

__all__ = ["default_views", "export_html", "html_page", "player_html"]

_BASE_VIEWS = ("pool", "free_queue", "block_table", "hash_chain", "events")


def default_views(trace: Any) -> list[str]:
    """The panels a player shows unless told otherwise: pool, free queue, block table, hash
    chains and events, plus the hybrid fixed-point panel when the trace holds fixed-point turns
    (FIXED_POINT_ITERATED events, recorded by get_computed_blocks on a hybrid model).

    Args:
        trace: A kvlab.trace.Trace.
    """
    from kvlab.trace import EventKind

    views = list(_BASE_VIEWS)
    if len(trace) and bool((trace.cols.kind == int(EventKind.FIXED_POINT_ITERATED)).any()):
        views.insert(views.index("hash_chain"), "fixed_point")
    return views

_DEFAULTS = {
    "index": -1,
    "playing": False,
    "speed": 4.0,
    "play_mode": "over",
    "views": list(_BASE_VIEWS),  # player_html: default_views(trace)
    "requests": [],
    "jump_kind": "CALL_BEGIN",
    "max_queue": 32,
    "checkpoint_interval": 1024,
    "predict": [],
}

_DEFAULT_TITLE = N_("kvlab trace")
_HTML_LANG = {"en": "en", "zh": "zh-Hans"}  # the page's <html lang>: Simplified Chinese fonts

_PAGE_CSS = "body { margin: 24px; font-family: system-ui, sans-serif; }"

_MODEL_SHIM = """
(function () {
  function StaticModel(state) { this.state = state; this.handlers = {}; }
  StaticModel.prototype.get = function (k) { return this.state[k]; };
  StaticModel.prototype.set = function (k, v) {
    var old = this.state[k]; this.state[k] = v;
    if (old !== v) (this.handlers["change:" + k] || []).slice().forEach(function (f) { f(); });
  };
  StaticModel.prototype.on = function (ev, f) { (this.handlers[ev] = this.handlers[ev] || []).push(f); };
  StaticModel.prototype.off = function (ev, f) {
    this.handlers[ev] = (this.handlers[ev] || []).filter(function (g) { return g !== f; });
  };
  StaticModel.prototype.save_changes = function () {};
  StaticModel.prototype.send = function () {};
  document.querySelectorAll("script[data-kvlab-player]").forEach(function (tag) {
    var state = JSON.parse(tag.textContent);
    var box = document.getElementById(tag.getAttribute("data-kvlab-player"));
    window.kvlabPlayer.render({ model: new StaticModel(state), el: box });
  });
})();
"""


def _json_for_script(value: Any) -> str:
    """JSON that cannot end its <script> element early."""
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def _language(lang: str | None) -> str:
    return language() if lang is None else check_language(lang)


def player_html(
    trace: Any, element_id: str = "kvlab-player", lang: str | None = None, **state: Any
) -> str:
    """The HTML fragment of one player (its container and its state); needs the page scripts.

    Args:
        trace: A kvlab.trace.Trace.
        element_id: The container's id (unique within the page).
        lang: The player's language (``en``, ``zh``; None = the current language): its labels
            (``kvlab.viz.player_strings``) and predict questions.
        **state: Initial widget state (index, views, requests, speed, ...; see TracePlayer);
            ``predict`` (kinds from ``kvlab.viz.predict.PREDICT_KINDS``) turns on the predict
            mode, its questions computed here and inlined.

    Raises:
        ValueError: If a state key is not a player setting, index is out of range, a predict
            kind is unknown, or ``lang`` is not en / zh.
        TypeError: If ``predict`` is a bare string, not a list of kinds.
    """
    lang = _language(lang)
    unknown = sorted(set(state) - set(_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown player setting(s) {unknown}; settings are {sorted(_DEFAULTS)}")
    full = {**_DEFAULTS, "views": default_views(trace), **state, "trace_data": encode_trace(trace),
            "num_events": len(trace)}
    if not -1 <= full["index"] < len(trace):
        raise ValueError(f"index must be in [-1, {len(trace)}), got {full['index']}")
    kinds = check_predict_kinds(full["predict"])
    full["predict"] = list(kinds)
    with use_language(lang):
        full["quiz"] = [p.to_dict() for p in quiz_points(trace, kinds)] if kinds else []
    full["lang"], full["labels"] = lang, player_labels(lang)
    eid = html.escape(element_id, quote=True)
    return (
        f'<div id="{eid}"></div>\n'
        f'<script type="application/json" data-kvlab-player="{eid}">{_json_for_script(full)}</script>\n'
    )


def html_page(
    body: str, title: str | None = None, description: str = "", lang: str | None = None
) -> str:
    """A complete page around player fragments (``player_html``): CSS, player script, shim.

    Args:
        body: HTML holding one or more ``player_html`` fragments (and anything else).
        title: Page title and heading (plain text, shown as ``kvlab.trace.untrusted.shown``
            gives it); None = "kvlab trace" in ``lang``.
        description: A paragraph under the heading (plain text, likewise).
        lang: The page's language (``en``, ``zh``; None = the current language): its
            ``<html lang>`` and default title.

    Raises:
        ValueError: If ``lang`` is not en / zh.
    """
    lang = _language(lang)
    if title is None:
        title = translations(lang).gettext(_DEFAULT_TITLE)
    return "\n".join(
        [
            "<!doctype html>",
            f'<html lang="{_HTML_LANG[lang]}">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{html.escape(shown(title, 200))}</title>",
            f"<style>\n{player_css()}\n{_PAGE_CSS}\n</style>",
            "</head>",
            "<body>",
            f"<h1>{html.escape(shown(title, 200))}</h1>",
            f"<p>{html.escape(shown(description, 2000))}</p>" if description else "",
            body,
            f"<script>\n{player_script()}</script>",
            f"<script>{_MODEL_SHIM}</script>",
            "</body>",
            "</html>",
        ]
    )


def export_html(
    trace: Any,
    path: str | PathLike[str],
    title: str | None = None,
    description: str = "",
    lang: str | None = None,
    **state: Any,
) -> Path:
    """Write a self-contained page that plays ``trace`` (player JS/CSS and trace inlined).

    Args:
        trace: A kvlab.trace.Trace.
        path: Output file; parent folders are created.
        title: Page title and heading; None = "kvlab trace" in ``lang``.
        description: A paragraph under the heading (plain text).
        lang: The player's language, ``"en"`` or ``"zh"`` (``zh_CN.UTF-8`` and the like are
            accepted): labels, captions and predict questions; identifiers (block_id, ref_cnt
            ...) stay vLLM's. None (default) = the current language (``kvlab.i18n.language()``:
            ``use_language``, else ``KVLAB_LANG`` / ``LANG`` ...).
        **state: Initial player state (index, views, requests, speed, ...); ``predict=("evict",
            "hit", "popleft")`` (any of them) asks the learner before each such decision.

    Returns:
        The path written.

    Raises:
        ValueError: If a state key is unknown, index is out of range, a predict kind is
            unknown or ``lang`` is not en / zh (nothing is written).
        TypeError: If ``predict`` is a bare string (nothing is written).
    """
    lang = _language(lang)
    page = html_page(player_html(trace, lang=lang, **state), title, description, lang)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out
