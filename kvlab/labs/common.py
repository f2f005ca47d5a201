"""Building blocks the labs share: scenario lists, implementation checks, divergence patterns."""

from __future__ import annotations

import functools
import inspect
import random
from collections.abc import Callable, Iterable
from typing import Any

from kvlab.i18n import _
from kvlab.labs.fixtures import load_recordings
from kvlab.labs.registry import Accepted, Scenario

__all__ = [
    "accept_class",
    "accept_functions",
    "manager_scenarios",
    "randomized",
    "recorded",
]

VLLM = "vLLM 0.22.1"


def recorded(kind: str, keep: Callable[[Any], bool] = lambda rec: True, limit: int | None = None) -> list[Scenario]:
    """Scenarios from the shipped vLLM 0.22.1 recordings of ``kind`` that ``keep`` selects."""
    out = []
    for i, rec in enumerate(load_recordings(kind)):
        if keep(rec):
            label = rec.config.get("family", kind)
            out.append(Scenario(f"{VLLM} · {label} · {i}", VLLM, lambda rec=rec: rec))
    return out[:limit]


def randomized(name: str, make: Callable[[], Any]) -> Scenario:
    """A fresh randomized scenario; ``make()`` runs kvlab's reference once, when first needed."""
    label = _("randomized")
    return Scenario(f"{label} · {name}", "kvlab", functools.cache(make))


def manager_scenarios(families: Iterable[str], seed: int, count: int, num_ops: int,
                      **overrides: Any) -> list[Scenario]:
    """``count`` randomized manager workloads over ``families``, decided by kvlab's reference."""
    from kvlab.labs.engine import hash_seeded
    from kvlab.labs.sides import ManagerSide
    from kvlab.labs.workloads import manager_config, record_workload

    families = list(families)
    r = random.Random(seed)
    out = []
    for k in range(count):
        family = families[k % len(families)]
        cfg_seed, run_seed = r.randrange(2**31), r.randrange(2**31)

        def make(family: str = family, cfg_seed: int = cfg_seed, run_seed: int = run_seed) -> Any:
            cfg = manager_config(family, random.Random(cfg_seed), **overrides)
            with hash_seeded(cfg["hash_fn"]):
                return record_workload(ManagerSide(cfg), cfg, run_seed, num_ops)

        out.append(randomized(f"{family} · {k}", make))
    return out


# ---------------------------------------------------------------------- implementations
def _kind_of(value: Any) -> str:
    if inspect.isclass(value):
        return _("the class {name}").format(name=value.__name__)
    if callable(value):
        return _("the function {name}").format(name=getattr(value, "__name__", "?"))
    return _("an object of type {type}").format(type=type(value).__name__)


def accept_class(value: Any, name: str, methods: Iterable[str]) -> Accepted:
    """A class with ``methods``, for a lab that takes a class ``name``.

    Raises:
        ValueError: With a plain sentence, for an instance, a function or a class that lacks one.
    """
    methods = list(methods)
    if not inspect.isclass(value):
        hint = _(" (pass the class itself, not an instance)") if not callable(value) else ""
        raise ValueError(_("this lab takes the class {name} (with {methods}); got {got}{hint}").format(
            name=name, methods=", ".join(methods), got=_kind_of(value), hint=hint))
    missing = [m for m in methods if not callable(getattr(value, m, None))]
    if missing:
        raise ValueError(_("the class {cls} has no {missing}; the lab calls {methods}").format(
            cls=value.__name__, missing=", ".join(missing), methods=", ".join(methods)))
    return Accepted({name: value})


def accept_functions(value: Any, names: Iterable[str], optional: Iterable[str] = ()) -> Accepted:
    """Functions found by name in ``value`` (one function, a tuple / list of them, or a namespace).

    Raises:
        ValueError: With a plain sentence, when a required function is missing.
    """
    names, optional = list(names), list(optional)
    found: dict[str, Any] = {}
    items = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if isinstance(item, dict):
            found.update({k: v for k, v in item.items() if callable(v)})
        elif inspect.isfunction(item) or inspect.ismethod(item):
            found[item.__name__] = item
        else:
            for n in names + optional:
                if callable(getattr(item, n, None)):
                    found[n] = getattr(item, n)
    missing = [n for n in names if n not in found]
    if missing:
        raise ValueError(_("this lab takes the functions {names}; missing: {missing}").format(
            names=", ".join(names), missing=", ".join(missing)))
    return Accepted({n: found[n] for n in names + optional if n in found})
