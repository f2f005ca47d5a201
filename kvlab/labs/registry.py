"""What a lab is: its scenarios, how the learner's piece is plugged in, its catalogue of mistakes.

Each ``kvlab/labs/lab_*.py`` module builds one :class:`Lab` and registers it; ``LABS`` lists
their names in course order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Accepted", "Lab", "Misconception", "Scenario", "register", "registered"]


@dataclass(frozen=True)
class Misconception:
    """A typical wrong implementation, recognised by the pattern of its first divergence.

    Attributes:
        id: ``"<lab>.<name>"``.
        concept: The concept missed, in a few words (an English msgid, translated when shown).
        hint: What to look at (an English msgid; never the solution).
        notebook: The notebook that teaches it (``"03_the_lru_free_queue"``).
        section: The heading of the section there (English; translated when shown).
        matches: ``matches(divergence) -> bool``.
    """

    id: str
    concept: str
    hint: str
    notebook: str
    section: str
    matches: Callable[[Any], bool]


@dataclass
class Scenario:
    """One workload of a lab.

    Attributes:
        name: Shown in reports (``"vLLM 0.22.1 · full · 2"``).
        source: ``"vLLM 0.22.1"`` (recorded decisions) or ``"kvlab"`` (randomized, kvlab's
            reference decides).
        recording: Produces the ``kvlab.labs.workloads.Recording`` (the randomized ones run
            kvlab's reference the first time).
    """

    name: str
    source: str
    recording: Callable[[], Any]


@dataclass
class Accepted:
    """A learner's implementation as a lab takes it: the parts found, by name."""

    parts: dict[str, Any]


@dataclass(frozen=True)
class Lab:
    """One build-it lab.

    Attributes:
        name: The name ``check`` takes (``"free_queue"``).
        title: What the learner builds (an English msgid).
        notebook: The lab notebook's stem (``"lab01_free_queue"``).
        accept: ``accept(implementation) -> Accepted``; raises ``ValueError`` with a plain
            sentence when the implementation is not what the lab takes.
        scenarios: ``scenarios(seed) -> list[Scenario]``.
        learner_side: ``learner_side(recording, accepted) -> side`` (kvlab's engine with the
            learner's piece in place).
        reference_side: ``reference_side(recording) -> side`` (kvlab's own engine).
        catalogue: The typical mistakes.
        after: The course notebooks to have read first (stems).
        reference_name: Whose decisions are the expected ones (shown in reports).
    """

    name: str
    title: str
    notebook: str
    accept: Callable[[Any], Accepted]
    scenarios: Callable[[int], list[Scenario]]
    learner_side: Callable[[Any, Accepted], Any]
    reference_side: Callable[[Any], Any]
    catalogue: tuple[Misconception, ...] = field(default=())
    after: tuple[str, ...] = ()
    reference_name: str = "vLLM 0.22.1"


_LABS: dict[str, Lab] = {}


def register(lab: Lab) -> Lab:
    """Add ``lab`` to the registry (module import time)."""
    _LABS[lab.name] = lab
    return lab


def registered() -> dict[str, Lab]:
    """The registered labs by name, in registration (course) order."""
    return dict(_LABS)
