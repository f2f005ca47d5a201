"""What a lab check returns: :class:`LabResult`, and :class:`Divergence`, the first decision that differs.

Both print as plain text (``str``), in the current language (``kvlab.i18n``); in JupyterLab a
``LabResult`` shows itself as HTML with, at a divergence, the player opened at that decision:
vLLM's run beside the learner's state (``kvlab.labs.view``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvlab.i18n import N_, _, use_language

__all__ = ["FIELD_LABELS", "Divergence", "LabResult", "field_label", "fmt_value", "source_name"]


FIELD_LABELS = {
    "return value": N_("return value"), "free queue": N_("free queue"), "cached map": N_("cached map"),
    "block ids": N_("block ids"), "events": N_("events"), "usage": N_("usage"),
    "free slots": N_("free slots"), "tree": N_("tree"),
}
"""Compared fields shown in words (the others are vLLM's identifiers, shown as they are)."""


def field_label(name: str) -> str:
    """A compared field's name as shown in reports (in the current language)."""
    return _(FIELD_LABELS[name]) if name in FIELD_LABELS else name


def source_name(source: str) -> str:
    """Who made the expected decisions, for a report (in the current language)."""
    if source.startswith("vLLM"):
        return "vLLM 0.22.1"  # a name, the same in every language
    if source.startswith("SGLang"):
        return source  # "SGLang 0.5.23 (kvlab.sglang)": names, the same in every language
    if source.startswith("SGLang"):
        return source  # "SGLang 0.5.23 (kvlab.sglang)": names, the same in every language
    if source == "nano-vllm":
        return _("nano-vllm (kvlab's re-implementation)")
    return _("kvlab's reference")


def fmt_value(value: Any, limit: int = 160) -> str:
    """A short, readable form of a recorded value (hashes as their first 8 hex digits)."""
    text = _fmt(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fmt(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        if len(value) > 4 and len(value) % 4 == 0 and len(value) in (20, 36):
            return f"{bytes(value[:-4]).hex()[:8]}…/g{int.from_bytes(value[-4:], 'big')}"
        return bytes(value).hex()[:8] + "…"
    if isinstance(value, dict):
        if "raises" in value and len(value) == 1:
            return _("raises {name}").format(name=value["raises"])
        return "{" + ", ".join(f"{_fmt(k)}: {_fmt(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return repr(value)


@dataclass
class Divergence:
    """The first decision where the learner's code differs from vLLM's (or kvlab's reference).

    Attributes:
        lab: The lab's name.
        scenario: The scenario's name (``"vLLM 0.22.1 · full · 2"``).
        source: Who made the expected decisions: ``"vLLM 0.22.1"`` (recorded) or ``"kvlab"``
            (kvlab's reference on a fresh randomized workload).
        step: Index of the operation in the scenario (-1 = the constructor).
        op: The operation (``"allocate_slots"``, ``"popleft_n"``, ``"__init__"`` ...).
        args: Its arguments.
        field: What differs first: ``"return value"``, a state field (``"free queue"``,
            ``"ref_cnt"``, ``"block_hash"``, ``"cached map"``, ``"events"`` ...), ``"exception"``
            or ``"time limit"``.
        want: The expected value of ``field``.
        got: The learner's value of ``field`` (the exception's text for ``"exception"``).
        fields: Every field that differs at this step: name -> (want, got).
        error: The learner's exception type and message, or None.
        where: The learner's line that raised (``"In [5], line 12, in popleft"``), or None.
        history: The calls just before, with the expected results.
        config: The scenario's configuration.
        want_state: The expected state after the operation (empty for "exception" / "time limit").
        got_state: The learner's state after the operation, as far as it could be read.
        state_before: The state both sides had before the operation.
        recording: The scenario's recording (expected answers and states), for the catalogue's
            patterns that replay it with a model of a mistake.
    """

    lab: str
    scenario: str
    source: str
    step: int
    op: str
    args: list
    field: str
    want: Any
    got: Any
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    error: str | None = None
    where: str | None = None
    history: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    want_state: dict = field(default_factory=dict)
    got_state: dict = field(default_factory=dict)
    state_before: dict = field(default_factory=dict)
    recording: Any = field(default=None, repr=False, compare=False)

    @property
    def call(self) -> str:
        """The operation as a call: ``popleft_n(3)``."""
        return f"{self.op}({', '.join(_fmt(a) for a in self.args)})"

    def describe(self) -> str:
        """A few lines: the scenario, the call, and what each side did (in the current language)."""
        who = source_name(self.source)
        lines = [_("First divergence: scenario {scenario}, operation {step}: {call}").format(
            scenario=self.scenario, step=self.step, call=self.call)]
        if self.field == "exception":
            lines.append(_("your code raised {error}").format(error=self.error))
            if self.where:
                lines.append(_("at {where}").format(where=self.where))
        elif self.field == "time limit":
            lines.append(_("your code did not finish within the time limit (an endless loop?)"))
            if self.where:
                lines.append(_("at {where}").format(where=self.where))
        else:
            yours = _("yours")
            for name, (want, got) in self.fields.items():
                lines.append(f"  {field_label(name)}:")
                lines.append(f"    {who}: {fmt_value(want)}")
                lines.append(f"    {yours}: {fmt_value(got)}")
        if self.history:
            lines.append(_("calls just before (with {who}'s results):").format(who=who))
            lines += [f"    {h}" for h in self.history[-5:]]
        return "\n".join(lines)


@dataclass
class LabResult:
    """The verdict of ``kvlab.labs.check``.

    Attributes:
        lab: The lab's name.
        passed: True when every scenario made the expected decisions.
        scenarios_passed: Scenarios that did (scenarios).
        scenarios_total: Scenarios run or skipped (scenarios).
        divergence: The first differing decision, or None.
        hint: The targeted hint (the concept and the notebook section that teaches it), or None.
        status: ``"passed"``, ``"diverged"``, ``"raised"``, ``"timeout"``, ``"not implemented"``
            or ``"invalid"`` (the implementation is not what the lab takes).
        message: One plain sentence saying what happened.
        misconception: The catalogue entry recognised (``"free_queue.append_at_head"``), or None.
        seed: The seed of the randomized scenarios (pass it again to reproduce them).
        lang: The language the texts were made in.
    """

    lab: str
    passed: bool
    scenarios_passed: int
    scenarios_total: int
    divergence: Divergence | None = None
    hint: str | None = None
    status: str = "passed"
    message: str = ""
    misconception: str | None = None
    seed: int | None = None
    lang: str = "en"
    _view_data: Any = field(default=None, repr=False, compare=False)

    def __bool__(self) -> bool:
        return self.passed

    @property
    def score(self) -> float:
        """Fraction of scenarios passed, 0.0 to 1.0."""
        return self.scenarios_passed / self.scenarios_total if self.scenarios_total else 0.0

    def __str__(self) -> str:
        with use_language(self.lang):
            mark = "✓" if self.passed else "✗"
            head = _("{mark} {lab}: {passed}/{total} scenarios passed").format(
                mark=mark, lab=self.lab, passed=self.scenarios_passed, total=self.scenarios_total)
            lines = [head]
            if self.message:
                lines.append(self.message)
            if self.divergence is not None and self.status != "not implemented":
                lines.append(self.divergence.describe())
            if self.hint:
                lines.append(_("Hint: {hint}").format(hint=self.hint))
            return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        from kvlab.labs.view import result_html

        return result_html(self)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        view = None
        if self.divergence is not None and self.status != "not implemented":
            try:
                view = self.show()
            except ImportError:  # no kvlab[lab]: the report alone
                view = None
        if view is not None:
            display(view)
        else:
            display({"text/plain": str(self), "text/html": self._repr_html_()}, raw=True)

    def show(self) -> Any:
        """The divergence view (a widget in JupyterLab): vLLM's run and yours at the divergence.

        Returns None when there is no divergence to show.
        """
        from kvlab.labs.view import divergence_view

        return divergence_view(self)
