"""A tqdm progress bar that can be switched off (``progress=False``); tqdm is optional."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def progress_bar(items: Iterable[T], *, desc: str, unit: str, enable: bool = True,
                 total: int | None = None) -> Iterator[T]:
    """Iterate ``items``, drawing a tqdm bar on stderr when ``enable`` (and tqdm is installed).

    Args:
        items: what to iterate.
        desc: the bar's label.
        unit: what one step is ("tensor", "file").
        enable: False = plain iteration, no output.
        total: number of steps when ``items`` has no ``len``.
    """
    if not enable:
        yield from items
        return
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is optional: silently iterate
        yield from items
        return
    yield from tqdm(items, desc=desc, unit=unit, total=total, leave=False)
