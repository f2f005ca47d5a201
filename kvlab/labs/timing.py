"""How a free queue's ``remove`` scales with the pool: O(1) for vLLM's linked list, O(n) for a deque.

A deque-based FreeKVCacheBlockQueue makes vLLM's decisions (it passes the lab) but its ``remove``
scans: a prefix-cache hit on a block in the middle of a 100,000-block queue walks half of it.
:func:`remove_scaling` measures microseconds per ``remove`` of a middle block at growing pool
sizes, for the learner's class next to kvlab's (vLLM's) own.

Examples:
    >>> from kvlab.core import FreeKVCacheBlockQueue
    >>> print(remove_scaling(FreeKVCacheBlockQueue, sizes=(1000, 10000)))   # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kvlab.i18n import _, use_language

__all__ = ["Scaling", "remove_scaling"]


@dataclass
class Scaling:
    """µs per ``remove`` at each pool size, for the learner's class and vLLM's."""

    sizes: tuple[int, ...]
    yours_us: tuple[float, ...]
    vllm_us: tuple[float, ...]
    error: str | None = None
    lang: str = "en"

    @property
    def growth(self) -> float:
        """Time per remove at the largest size over the smallest (1 = constant)."""
        return self.yours_us[-1] / max(self.yours_us[0], 1e-9) if self.yours_us else float("nan")

    @property
    def constant(self) -> bool:
        """Whether ``remove`` stays O(1): less than 10× slower on a pool 100× larger."""
        return self.growth < 10

    def __str__(self) -> str:
        with use_language(self.lang):
            if self.error:
                return self.error
            lines = [_("pool size   yours (µs per remove)   vLLM's (µs per remove)")]
            for n, y, v in zip(self.sizes, self.yours_us, self.vllm_us):
                lines.append(f"{n:>9,}   {y:>10.2f} µs   {v:>10.2f} µs")
            verdict = (_("remove stays O(1): the linked list unlinks a block from its neighbours")
                       if self.constant else
                       _("remove grows with the pool (O(n)): it scans for the block; vLLM unlinks it in O(1)"))  # fmt: skip
            lines.append(verdict)
            return "\n".join(lines)

    __repr__ = __str__


def _innermost(exc: BaseException) -> str:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_name if tb is not None else "remove"


def _time_remove(queue_cls: Any, n: int, repeats: int) -> float:
    from kvlab.core import KVCacheBlock

    blocks = [KVCacheBlock(i) for i in range(n)]
    queue = queue_cls(list(blocks))
    middle = blocks[n // 2 - repeats // 2: n // 2 - repeats // 2 + repeats]
    start = time.perf_counter()
    for block in middle:
        queue.remove(block)
    return (time.perf_counter() - start) / repeats * 1e6


def remove_scaling(queue_cls: Any, sizes: tuple[int, ...] = (1_000, 10_000, 100_000),
                   repeats: int = 20, lang: str | None = None) -> Scaling:
    """Microseconds per ``remove`` of a middle block, at each pool size.

    Args:
        queue_cls: The learner's FreeKVCacheBlockQueue class.
        sizes: Pool sizes (blocks), increasing.
        repeats: Removes timed per size.
        lang: Language of the printed table (None = the current one).

    Returns:
        A :class:`Scaling` (prints as a table and a verdict). If the class cannot be timed yet
        (its body still raises, or it fails), ``error`` says so in a plain sentence.
    """
    from kvlab.core import FreeKVCacheBlockQueue

    with use_language(lang) as lang:
        try:
            yours = tuple(_time_remove(queue_cls, n, repeats) for n in sizes)
        except NotImplementedError as exc:
            name = exc.__traceback__.tb_next and _innermost(exc) or "remove"
            return Scaling(sizes, (), (), _("not implemented yet: {name} still raises NotImplementedError; write it, then run this cell again").format(name=name), lang)
        except Exception as exc:  # noqa: BLE001 - the learner's code
            return Scaling(sizes, (), (), _("could not time remove: {error}").format(error=f"{type(exc).__name__}: {exc}"), lang)
        vllm = tuple(_time_remove(FreeKVCacheBlockQueue, n, repeats) for n in sizes)
        return Scaling(sizes, yours, vllm, None, lang)
