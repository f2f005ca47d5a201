"""TracePlayer: step through a kvlab trace in JupyterLab (and in static pages) like a debugger.

The widget is a small Python model with synced traitlets and a view written in JavaScript
(``kvlab/viz/static``): the trace travels once, in compact columnar form (``encode_trace``),
and the JavaScript replays it with checkpoints and draws the pool grid, free queue, block
table, token positions -> slots, allocate_slots' layout, the hybrid fixed point, hash chains
and events (``VIEWS``; each computed from the trace alone), labelled in the player's
language (``lang``: English or Chinese, ``kvlab.viz.player_strings``). Stepping works in the
browser alone, so a saved notebook or an ``export_html`` page plays without a kernel; the
Python methods below move the same cursor from code (the same rules: ``kvlab.viz.navigation``).

Needs the optional packages ``anywidget`` and ``ipywidgets`` (``pip install kvlab[lab]``);
``import kvlab.viz`` works without them and only ``TracePlayer`` asks for them.

Examples:
    >>> from kvlab.viz import TracePlayer
    >>> player = TracePlayer(trace)                    # doctest: +SKIP
    >>> player.step_over(); player.index               # doctest: +SKIP
    0
"""

from __future__ import annotations

from typing import Any

try:
    import anywidget
    import traitlets as t
except ImportError as exc:  # pragma: no cover - exercised where the extra is missing
    raise ImportError(
        "kvlab.viz.TracePlayer needs anywidget and ipywidgets: pip install 'kvlab[lab]' "
        "(tested with anywidget==0.11.0, ipywidgets==8.1.9)"
    ) from exc

from kvlab.i18n import check_language, language, use_language
from kvlab.trace import Event, EventKind, KVState
from kvlab.viz.assets import player_css, player_esm
from kvlab.viz.encode import FORMAT, encode_trace
from kvlab.viz.export import default_views
from kvlab.viz.navigation import Navigator
from kvlab.viz.player_strings import player_labels
from kvlab.viz.predict import PREDICT_KINDS, check_predict_kinds, quiz_points

__all__ = ["DEFAULT_VIEWS", "VIEWS", "TracePlayer"]

VIEWS = (
    "pool",
    "free_queue",
    "block_table",
    "slot_mapping",
    "allocate_slots",
    "fixed_point",
    "hash_chain",
    "events",
)
"""The player's panels, top to bottom: pool grid, free queue, block table, token positions ->
slots of the current allocate_slots call's request (one row per group), allocate_slots' token
layout to scale in blocks, the hybrid fixed point of the current get_computed_blocks call
(iterations x attention groups), hash chains, events."""

DEFAULT_VIEWS = ("pool", "free_queue", "block_table", "hash_chain", "events")
"""Panels shown unless ``views`` says otherwise; a trace with fixed-point turns adds
``fixed_point`` (``kvlab.viz.export.default_views``, export_html's default too)."""


class TracePlayer(anywidget.AnyWidget):
    """A trace player widget: a cursor over the trace and the views of the state there.

    Args:
        trace: A kvlab.trace.Trace.
        index: Initial cursor (-1 = the initial state, before event 0).
        fixed_point: Show the hybrid fixed-point panel: None (default) = whenever the trace
            holds fixed-point turns (FIXED_POINT_ITERATED), added to the ``views`` given;
            True / False = as ``views`` says / never.
        predict: Predict mode: decision kinds from ``PREDICT_KINDS`` (``"evict"``, ``"hit"``,
            ``"popleft"``) before which a forward step stops and asks the learner (the ``quiz``
            trait, from ``kvlab.viz.predict.quiz_points``); () = off.
        lang: The player's language, ``"en"`` or ``"zh"`` (``zh_CN.UTF-8`` and the like are
            accepted): labels, captions and the predict mode's questions; identifiers (block_id,
            ref_cnt, allocate_slots ...) stay vLLM's. None (default) = the current language
            (``kvlab.i18n.language()``: ``use_language``, else ``KVLAB_LANG`` / ``LANG`` ...).
        **kwargs: Initial values of the other traits (views, requests, speed, ...).

    Raises:
        traitlets.TraitError: If a trait value is invalid (index out of range, unknown view,
            request or event kind, non-positive speed, unknown predict kind, a language other
            than en / zh, ...).
    """

    _esm = player_esm()
    _css = player_css()

    trace_data = t.Dict(help="the trace in compact columnar form (kvlab.viz.encode_trace)").tag(
        sync=True
    )
    num_events = t.Int(0, read_only=True, help="events in the trace").tag(sync=True)
    index = t.Int(-1, help="cursor: the state after this event (-1 = before event 0)").tag(
        sync=True
    )
    playing = t.Bool(False, help="the browser is stepping on a timer").tag(sync=True)
    speed = t.Float(4.0, help="play speed (steps per second), in (0, 1000]").tag(sync=True)
    play_mode = t.Enum(("over", "into"), "over", help="what one play step does").tag(sync=True)
    views = t.List(t.Unicode(), list(DEFAULT_VIEWS), help=f"panels to show, from {VIEWS}").tag(
        sync=True
    )
    requests = t.List(
        t.Unicode(), [], help="request ids whose hash chains are drawn ([] = those holding blocks)"
    ).tag(sync=True)
    jump_kind = t.Unicode("CALL_BEGIN", help="EventKind name used by next/previous").tag(sync=True)
    max_queue = t.Int(32, help="free-queue blocks drawn at most (blocks), >= 2").tag(sync=True)
    checkpoint_interval = t.Int(
        1024, help="events between replay checkpoints in the browser, >= 16"
    ).tag(sync=True)
    predict = t.List(
        t.Unicode(), [], help=f"predict mode: decision kinds to ask about, from {PREDICT_KINDS}"
    ).tag(sync=True)
    quiz = t.List(
        t.Dict(), [], read_only=True, help="the predict mode's questions (kvlab.viz.predict)"
    ).tag(sync=True)
    lang = t.Unicode("en", help="the player's language: en or zh (kvlab.i18n.LANGUAGES)").tag(
        sync=True
    )
    labels = t.Dict(
        read_only=True, help="the labels in lang, {english: translation} ({} = English)"
    ).tag(sync=True)

    def __init__(
        self,
        trace: Any,
        index: int = -1,
        fixed_point: bool | None = None,
        predict: Any = (),
        lang: str | None = None,
        **kwargs: Any,
    ) -> None:
        self._trace = trace
        self._nav = Navigator(trace)
        kwargs.setdefault("views", default_views(trace))  # + fixed_point on a hybrid trace
        has_turns = "fixed_point" in default_views(trace)
        if fixed_point is None and has_turns and "fixed_point" not in kwargs["views"]:
            kwargs["views"] = [*kwargs["views"], "fixed_point"]  # asked views + the turns
        elif fixed_point is False:
            kwargs["views"] = [v for v in kwargs["views"] if v != "fixed_point"]
        try:
            lang = language() if lang is None else check_language(lang)
        except ValueError as exc:
            raise t.TraitError(str(exc)) from None
        super().__init__(trace_data=encode_trace(trace), index=index, lang=lang, **kwargs)
        self.set_trait("num_events", len(trace))
        self.set_trait("labels", player_labels(self.lang))
        try:
            kinds = check_predict_kinds(predict)
        except (TypeError, ValueError) as exc:
            raise t.TraitError(str(exc)) from None
        self.predict = list(kinds)  # fills ``quiz``

    # ------------------------------------------------------------------ validation
    @t.validate("trace_data")
    def _valid_trace_data(self, proposal: dict[str, Any]) -> dict[str, Any]:
        value = proposal["value"]
        if value.get("format") != FORMAT:
            raise t.TraitError(f"trace_data must come from encode_trace ({FORMAT!r})")
        return value

    @t.validate("index")
    def _valid_index(self, proposal: dict[str, Any]) -> int:
        value, n = proposal["value"], len(self._trace)
        if not -1 <= value < n:
            raise t.TraitError(f"index must be in [-1, {n}) for a trace of {n} events, got {value}")
        return value

    @t.validate("speed")
    def _valid_speed(self, proposal: dict[str, Any]) -> float:
        if not 0 < proposal["value"] <= 1000:
            raise t.TraitError(
                f"speed must be in (0, 1000] steps per second, got {proposal['value']}"
            )
        return proposal["value"]

    @t.validate("views")
    def _valid_views(self, proposal: dict[str, Any]) -> list[str]:
        value = list(proposal["value"])
        bad = [v for v in value if v not in VIEWS]
        if bad or len(set(value)) != len(value):
            raise t.TraitError(f"views must be distinct names from {VIEWS}, got {value}")
        return value

    @t.validate("requests")
    def _valid_requests(self, proposal: dict[str, Any]) -> list[str]:
        known = set(self._trace.tables.requests)
        bad = [r for r in proposal["value"] if r not in known]
        if bad:
            raise t.TraitError(f"unknown request id(s) {bad}; the trace has {sorted(known)[:20]}")
        return list(proposal["value"])

    @t.validate("jump_kind")
    def _valid_jump_kind(self, proposal: dict[str, Any]) -> str:
        if proposal["value"] not in EventKind.__members__:
            raise t.TraitError(
                f"jump_kind must be an EventKind name ({', '.join(EventKind.__members__)}), "
                f"got {proposal['value']!r}"
            )
        return proposal["value"]

    @t.validate("predict")
    def _valid_predict(self, proposal: dict[str, Any]) -> list[str]:
        try:
            return list(check_predict_kinds(proposal["value"]))
        except (TypeError, ValueError) as exc:
            raise t.TraitError(str(exc)) from None

    @t.validate("lang")
    def _valid_lang(self, proposal: dict[str, Any]) -> str:
        try:
            return check_language(proposal["value"])
        except ValueError as exc:
            raise t.TraitError(str(exc)) from None

    @t.observe("lang")
    def _relabel(self, change: dict[str, Any]) -> None:
        self.set_trait("labels", player_labels(change["new"]))
        if self.predict:  # the questions are asked in the player's language
            self._make_quiz({"new": self.predict})

    @t.observe("predict")
    def _make_quiz(self, change: dict[str, Any]) -> None:
        with use_language(self.lang):
            points = quiz_points(self._trace, change["new"]) if change["new"] else []
        self.set_trait("quiz", [p.to_dict() for p in points])

    @t.validate("max_queue", "checkpoint_interval")
    def _valid_minimum(self, proposal: dict[str, Any]) -> int:
        name = proposal["trait"].name
        least = 2 if name == "max_queue" else 16
        if proposal["value"] < least:
            raise t.TraitError(f"{name} must be >= {least}, got {proposal['value']}")
        return proposal["value"]

    # ------------------------------------------------------------------ reading
    @property
    def trace(self) -> Any:
        """The trace being played."""
        return self._trace

    @property
    def state(self) -> KVState:
        """The KV state at the cursor (``trace.state_at(index)``)."""
        return self._trace.state_at(self.index)

    @property
    def event(self) -> Event | None:
        """The event at the cursor (None before event 0)."""
        return None if self.index < 0 else self._trace[self.index]

    # ------------------------------------------------------------------ moving
    def step_into(self) -> int:
        """One event forward; returns the new index."""
        self.index = self._nav.into(self.index)
        return self.index

    def step_over(self) -> int:
        """Forward over the whole call the next event opens; returns the new index."""
        self.index = self._nav.over(self.index)
        return self.index

    def step_out(self) -> int:
        """To the end of the call containing the next event; returns the new index."""
        self.index = self._nav.out(self.index)
        return self.index

    def back(self) -> int:
        """One event backward; returns the new index."""
        self.index = self._nav.back(self.index)
        return self.index

    def back_over(self) -> int:
        """Backward over a whole call ending at the cursor; returns the new index."""
        self.index = self._nav.back_over(self.index)
        return self.index

    def next_kind(self, kind: EventKind | str | None = None) -> int:
        """To the next event of ``kind`` (default ``jump_kind``); returns the new index."""
        self.index = self._nav.next_kind(self.index, self.jump_kind if kind is None else kind)
        return self.index

    def prev_kind(self, kind: EventKind | str | None = None) -> int:
        """To the previous event of ``kind`` (default ``jump_kind``); returns the new index."""
        self.index = self._nav.prev_kind(self.index, self.jump_kind if kind is None else kind)
        return self.index

    def seek(self, index: int) -> int:
        """To ``index`` (the scrubber); returns it.

        Raises:
            traitlets.TraitError: If index is not in [-1, len(trace)).
        """
        self.index = index
        return self.index

    def play(self, speed: float | None = None) -> None:
        """Start stepping in the browser (``speed`` steps per second, default unchanged)."""
        if speed is not None:
            self.speed = speed
        self.playing = True

    def pause(self) -> None:
        """Stop stepping."""
        self.playing = False
