"""The trace player's labels: every English string its JavaScript shows, as catalogue messages.

The player (``kvlab/viz/static/player.js`` and ``views.js``) looks each label up with
``tr("...")`` (or ``trn(singular, plural, n)``, ``static/i18n.js``) in a ``{english:
translation}`` object that the widget (``TracePlayer(lang=...)``) and exported pages
(``export_html(lang=...)``) send with the trace: ``player_labels(lang)``. The strings are listed
here, marked with ``N_``, so that ``pybabel extract`` puts them in kvlab's catalogue like any
other view's; a test keeps this list equal to the labels the JavaScript uses. Placeholders
(``{n}``, ``{request}`` ...) are filled in by the JavaScript. vLLM's identifiers (block_id,
ref_cnt, popleft ...) are kept in every language.

Examples:
    >>> player_labels("zh")["free, cached: evictable"]
    '空闲、已缓存：可驱逐'
    >>> player_labels("en")
    {}
"""

from __future__ import annotations

from kvlab.i18n import N_, check_language, language, translations

__all__ = ["PLAYER_STRINGS", "player_labels"]

PLAYER_STRINGS = (
    N_("to the initial state (Home)"),
    N_("back over a call (Shift+←)"),
    N_("one event back (←)"),
    N_("play"),
    N_("play / pause (Space)"),
    N_("step into: one event (→)"),
    N_("step over a call (Shift+→)"),
    N_("step out of the current call (↑)"),
    N_("to the last event (End)"),
    N_("event index"),
    N_("event kind to jump to"),
    N_("none"),
    N_("events per second"),
    N_("what play steps"),
    N_("play steps over calls"),
    N_("play steps into calls"),
    N_("predict, then reveal"),
    N_("ask every question again"),
    N_("reset quiz"),
    N_("pause"),
    N_("✗ Not {choice}. Try again, or show the answer."),
    N_("✓ Right"),
    N_("✓ Right (not at the first try)"),
    N_("Pick an answer first (keys 1–{n}), show the answer, or step back (←)."),
    N_("The answer"),
    N_("show answer"),
    N_("{verdict}: {choice}. {explanation}"),
    N_("Revealed:"),
    N_("Predict:"),
    N_("predict: {right} right of {answered} answered · {left} to go"),
    N_("event {i} of {n}"),
    N_("step {step}"),
    N_("mirrors"),
    N_("this event's vLLM 0.22.1 source on GitHub"),
    N_("BlockPool · {n} blocks · {free} in the free queue"),
    N_("jump to"),
    N_("previous"),
    N_("next"),
    N_("in use (ref_cnt 1)"),
    N_("shared (ref_cnt ≥ 2)"),
    N_("free, cached: evictable"),
    N_("free, empty"),
    N_("in transit (mid-operation)"),
    N_("already computed, blocks held"),
    N_("prefix-cache hit (touch)"),
    N_("KV from a connector"),
    N_("computed this step"),
    N_("draft slots, never cached"),
    N_("group {g}"),
    N_("group {g} · {spec} (window {window})"),
    N_("group {g} · {spec}"),
    N_("block {b}: {status}, ref_cnt {ref_cnt}"),
    N_(", block_hash {hash}"),
    N_("group {g} {spec}"),
    N_("evicts first"),
    N_("fake head"),
    N_("… {n} more …"),
    N_("fake tail"),
    N_("free_blocks appends"),
    N_("free_block_queue · {blocks} · popleft takes from the left"),
    N_("block table (req_to_blocks) · {rows}"),
    N_("no request holds blocks"),
    N_("request"),
    N_("group"),
    N_("hash chains (block_hash) · green: cached, a lookup hits · red: not cached"),
    N_("no known hash chain for these requests"),
    N_("initial state (before event 0)"),
    N_("no get_computed_blocks call yet"),
    N_("get_computed_blocks [{request}] at event #{begin}"),
    N_("{head}: one attention type, no fixed point"),
    N_("iteration"),
    N_("event #{seq}"),
    N_("(reused)"),
    N_("result: num_new_computed_tokens = {n}"),
    N_("converging…"),
    N_("hybrid fixed point · {head}"),
    N_(
        "tokens · ✂ this group shortened the candidate · (reused) full attention truncated its earlier hit · [ids] the hit's blocks, ∅ = null_block · {result}"
    ),
    N_("unfinished"),
    N_("{outcome}, num_blocks_to_allocate = {n}"),
    N_("allocated"),
    N_("refused (None)"),
    N_("allocate_slots [{request}] at event #{begin} · {result}"),
    N_("no allocate_slots call yet"),
    N_("{name}: tokens {first}..{last}"),
    N_("{tokens}: {meaning}"),
    N_("block_size = {size} · {tokens} in {blocks} · ruler = logical block index"),
    N_("position"),
    N_("slot"),
    N_("no block yet"),
    N_("position {pos} → block {block_id}, offset {offset}"),
    N_("no tokens"),
    N_("positions {first}..{last} of {total}"),
    N_("token positions → slots · request {request} · {span}"),
    N_(
        "slot = block_id × block_size + position % block_size · · = no block yet · ∅ = null_block (outside the window)"
    ),
    N_("{n} block"),
    N_("{n} blocks"),
    N_("{n} row"),
    N_("{n} rows"),
    N_("… {n} more row"),
    N_("… {n} more rows"),
    N_("{n} token"),
    N_("{n} tokens"),
)
"""The English labels of the player's JavaScript, in the order the sources use them."""


def player_labels(lang: str | None = None) -> dict[str, str]:
    """The player's labels in ``lang``: ``{english: translation}`` for every PLAYER_STRINGS entry.

    Args:
        lang: A language kvlab speaks (``en``, ``zh``; ``zh_CN.UTF-8`` and the like are
            normalised); None = the current language (``kvlab.i18n.language()``: set by
            ``use_language``, else the environment's default).

    Returns:
        ``{}`` for English (the JavaScript shows its English source strings), else one entry per
        label.

    Raises:
        ValueError: If ``lang`` is not a language kvlab speaks (the message lists them).
    """
    lang = language() if lang is None else check_language(lang)
    if lang == "en":
        return {}
    gettext = translations(lang).gettext
    return {message: gettext(message) for message in PLAYER_STRINGS}
