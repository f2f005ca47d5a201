"""ComparePlayer: vLLM's hash map + free queue beside SGLang's radix tree, step by step.

One workload, two caches (``kvlab.compare.compare(..., record=True)``): at each driver step the
player shows each cache's state at the end of the step (vLLM: the pool grid and the free queue,
whose order is its eviction order; radix: the tree, its locked paths and the LRU order of its
evictable leaves) and a narration of what differs: the hit of each request admitted in the
step on each cache (whole blocks against tokens), and the tokens each evicted so far. The frames
are computed here; the widget's JavaScript (``static/compare_player.js``) only steps through
them, so it plays in JupyterLab and on the static site with no kernel.

Examples:
    >>> c = compare(shared_system_prompt(4, 30, 8, 4), pool_tokens=64, block_size=4,
    ...             policies=("vllm", "radix"), record=True)         # doctest: +SKIP
    >>> ComparePlayer(c)                                             # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

try:
    import anywidget
    import traitlets as t
except ImportError as exc:  # pragma: no cover - exercised where the extra is missing
    raise ImportError("kvlab.viz.ComparePlayer needs anywidget and ipywidgets: pip install 'kvlab[lab]'") from exc


import html as _html_mod
import json
from pathlib import Path

from kvlab.i18n import _, check_language, language, use_language
from kvlab.trace.untrusted import shown
from kvlab.viz.assets import static_text
from kvlab.viz.compare_side_by_side import render_cache_at_step
from kvlab.viz.terminal import to_html

__all__ = ["ComparePlayer", "compare_frames", "export_compare_html"]

_CSS = """
.kvlab-cmp { font-family: system-ui, sans-serif; outline: none; }
.kvlab-cmp-panels { display: grid; grid-template-columns: 1fr 1fr; gap: 8px; }
.kvlab-cmp-panel h4 { margin: 4px 0; }
.kvlab-cmp-body pre { font-size: 11px; line-height: 1.25; margin: 0; overflow-x: auto; }
.kvlab-cmp-notes { margin: 4px 0 8px 0; }
"""


def _html(renderable: Any, width: int) -> str:
    return to_html(renderable, width)


def _notes(runs: dict, names: list[str], step: int) -> list[str]:
    notes = []
    block_size = next(iter(runs.values())).block_size
    admitted = {}
    for name in names:
        for rid, rec in runs[name].requests.items():
            if rec.admit_step == step:
                admitted.setdefault(rid, {})[name] = rec.first_hit_tokens
    for rid, hits in admitted.items():
        parts = ", ".join(f"{n} {hits[n]}" for n in names if n in hits)
        line = _("{request} admitted: hit tokens {parts}").format(request=shown(rid), parts=parts)
        vllm, radix = hits.get("vllm"), hits.get("radix")
        if vllm is not None and radix is not None and 0 < radix - vllm < block_size:
            line += _(" (vLLM hits whole {size}-token blocks only: the last {d} matching tokens sit in a "
                      "partial block)").format(size=block_size, d=radix - vllm)  # fmt: skip
        notes.append(line)
    evicted = []
    for name in names:
        steps = runs[name].steps
        if steps:
            evicted.append(f"{name} {steps[min(step, len(steps) - 1)].evicted_tokens}")
    if evicted:
        notes.append(_("evicted so far (tokens): {parts}").format(parts=", ".join(evicted)))
    return notes


def compare_frames(comparison: Any, policies: tuple[str, ...] = ("vllm", "radix"), width: int = 64,
                   max_blocks: int = 64) -> list[dict]:  # fmt: skip
    """The player's frames: for each driver step, each cache's view (HTML) and the notes.

    Args:
        comparison: A kvlab.compare.Comparison made with ``record=True`` (or policy -> RunResult).
        policies: The runs to show, left to right.
        width: Columns of each panel's text view.
        max_blocks: Blocks of the pool grid at most.

    Raises:
        KeyError: A policy was not run.
        TypeError: A run was not recorded.
    """
    runs = comparison.runs if hasattr(comparison, "runs") else comparison
    names = list(policies)
    missing = [p for p in names if p not in runs]
    if missing:
        raise KeyError(f"policies {missing} were not run; runs: {', '.join(runs)}")
    last = max(len(runs[n].steps) for n in names)
    frames = []
    for step in range(last):
        panels = []
        for name in names:
            steps = runs[name].steps
            usage = steps[min(step, len(steps) - 1)]
            title = _("{cache} · used {used} · cached {cached} tokens").format(
                cache=name, used=usage.num_used_tokens, cached=usage.num_cached_tokens)  # fmt: skip
            panels.append({"policy": name, "title": title,
                           "html": _html(render_cache_at_step(runs[name].trace, step, max_blocks), width)})  # fmt: skip
        frames.append({"step": step, "panels": panels, "notes": _notes(runs, names, step)})
    return frames


class ComparePlayer(anywidget.AnyWidget):
    """Step through two caches' runs of one workload, side by side, with what differs.

    Args:
        comparison: A kvlab.compare.Comparison made with ``record=True``.
        policies: The two (or more) runs to show, left to right (default vllm, radix).
        lang: "en" or "zh" (None = the current language) for the labels and notes.

    Raises:
        KeyError, TypeError: As ``compare_frames``; ValueError for an unknown language.
    """

    _esm = static_text("compare_player.js")
    _css = _CSS
    frames = t.List(help="per driver step: {step, panels: [{policy, title, html}], notes}").tag(sync=True)
    index = t.Int(0, help="the frame shown").tag(sync=True)
    labels = t.Dict(help="button titles in the player's language").tag(sync=True)

    def __init__(self, comparison: Any, policies: tuple[str, ...] = ("vllm", "radix"),
                 lang: str | None = None, **kwargs: Any) -> None:  # fmt: skip
        lang = check_language(lang) if lang is not None else language()
        with use_language(lang):
            frames = compare_frames(comparison, tuple(policies))
            labels = {"prev": _("previous step"), "next": _("next step"), "step": _("step")}
        super().__init__(frames=frames, labels=labels, **kwargs)

    @t.validate("index")
    def _check_index(self, proposal: Any) -> int:
        value = proposal["value"]
        if not 0 <= value < max(len(self.frames), 1):
            raise t.TraitError(f"index must be in [0, {len(self.frames)}), got {value}")
        return value

    def __repr__(self) -> str:
        return f"ComparePlayer({len(self.frames)} steps, index={self.index})"


def export_compare_html(comparison: Any, path: str | Path, policies: tuple[str, ...] = ("vllm", "radix"),
                        lang: str | None = None) -> Path:  # fmt: skip
    """Write a self-contained page with the side-by-side player (no kernel, no network).

    The widget's JavaScript runs with a small stand-in for anywidget's model; the frames are
    inlined. Used by the session slides (``kvlab slides --session 3``).

    Raises:
        KeyError, TypeError: As ``compare_frames``; ValueError for an unknown language.
    """
    lang = check_language(lang) if lang is not None else language()
    with use_language(lang):
        frames = compare_frames(comparison, tuple(policies))
        labels = {"prev": _("previous step"), "next": _("next step"), "step": _("step")}
    code = static_text("compare_player.js").replace("export default { render };", "const player = { render };")
    state = json.dumps({"frames": frames, "index": 0, "labels": labels}).replace("</", "<\\/")
    title = _html_mod.escape(" · ".join(policies))
    page = Path(path)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(f"""<!doctype html>
<html lang="{lang}"><head><meta charset="utf-8"><title>{title}</title>
<style>{_CSS} body {{ margin: 8px; }} .kvlab-btn {{ margin-right: 4px; }}</style></head>
<body><div id="kvlab-compare"></div>
<script type="module">
{code}
const state = {state}, handlers = {{}};
const model = {{ get: (k) => state[k], set: (k, v) => {{ state[k] = v; (handlers["change:" + k] || []).forEach((f) => f()); }},
  save_changes: () => {{}}, on: (e, f) => (handlers[e] = (handlers[e] || []).concat([f])), off: () => {{}} }};
player.render({{ model, el: document.getElementById("kvlab-compare") }});
window.kvlabReady = true;
</script></body></html>
""", encoding="utf-8")
    return page
