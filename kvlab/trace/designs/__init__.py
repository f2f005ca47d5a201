"""Cache designs: one adapter per KV-cache design that a trace can come from.

A trace's ``config["cache"]`` names its design: absent or ``"vllm-v1"`` (kvlab.core, vLLM V1),
``"nano-vllm"`` (a recorded ``kvlab.nanovllm.NanoBlockManager``), ``"vllm-kv-events"`` (a trace
rebuilt from a real vLLM's KV-event stream). Views and explanations never test that value
themselves: they ask the trace's :class:`CacheDesign` (``design_of(trace)``) for what differs
between designs — the line naming the design, the free-list labels, which calls are lookups,
how a cached block left the cache, per-event notes and counters. A new design is one new module
that subclasses CacheDesign and calls :func:`register`.

Examples:
    >>> from kvlab.trace.designs import design_of
    >>> design_of({"cache": "nano-vllm"}).lookup_call_names
    ('get_computed_blocks', 'allocate')
    >>> design_of({}).title
    'vLLM V1 (BlockPool + FreeKVCacheBlockQueue, kvlab.core)'
"""

from __future__ import annotations

from typing import Any

from kvlab.trace.designs.base import CacheDesign, UnknownDesign

__all__ = ["CacheDesign", "UnknownDesign", "design_of", "designs", "register"]

_REGISTRY: dict[str | None, CacheDesign] = {}


def register(design: CacheDesign) -> CacheDesign:
    """Make ``design`` the adapter of traces whose ``config["cache"]`` is one of its ``names``.

    Returns the design (so a module can write ``DESIGN = register(MyDesign())``).

    Raises:
        TypeError: If ``design`` is not a CacheDesign.
        ValueError: If one of its names is already taken by another design.
    """
    if not isinstance(design, CacheDesign):
        raise TypeError(f"register() takes a CacheDesign, got {type(design).__name__}")
    for name in design.names:
        taken = _REGISTRY.get(name)
        if taken is not None and taken is not design:
            raise ValueError(f"cache design name {name!r} is already registered by {taken.title!r}")
    for name in design.names:
        _REGISTRY[name] = design
    return design


def designs() -> list[CacheDesign]:
    """The registered designs, each once, in registration order."""
    return list(dict.fromkeys(_REGISTRY.values()))


def design_of(trace_or_config: Any) -> CacheDesign:
    """The adapter of a Trace (or of a trace config dict), by its ``config["cache"]``.

    An unregistered name gets an :class:`UnknownDesign` that shows the name as given and
    otherwise behaves as vLLM V1 (the trace format's default).
    """
    config = trace_or_config if isinstance(trace_or_config, dict) else trace_or_config.config
    name = config.get("cache")
    design = _REGISTRY.get(name)
    return design if design is not None else UnknownDesign(str(name))


# The built-in designs register themselves on import (NOTE: after the registry exists).
from kvlab.trace.designs import kv_events, nano_vllm, vllm_v1  # noqa: F401
