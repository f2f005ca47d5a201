"""Benchmark: what vLLM's ABC base classes cost per ``isinstance`` (kvlab's are plain classes).

vLLM 0.22.1's ``SingleTypeKVCacheManager`` and ``KVCacheCoordinator`` are ``abc.ABC``s, and
``KVCacheCoordinator.get_num_blocks_to_allocate`` / ``allocate_new_blocks`` ask
``isinstance(manager, CrossAttentionManager)`` once per KV cache group on every allocate_slots.
An ``isinstance`` against an ABC subclass goes through ``ABCMeta.__instancecheck__``; against a plain
class it is a type-pointer walk. This script times both, side by side in one process::

    .venv/bin/python benchmarks/bench_abc_isinstance.py

and prints ns per check and the ratio (ABC / plain). kvlab's mirror keeps vLLM's statements and
drops the ABC (a NOTE in kvlab/core/single_type_kv_cache_manager.py says so).
"""

from __future__ import annotations

import abc
import statistics
import timeit


class PlainBase:
    pass


class PlainManager(PlainBase):
    pass


class PlainCross(PlainBase):
    pass


class AbcBase(abc.ABC):
    @abc.abstractmethod
    def f(self) -> None: ...


class AbcManager(AbcBase):
    def f(self) -> None: ...


class AbcCross(AbcBase):
    def f(self) -> None: ...


def main() -> None:
    plain, abcm = PlainManager(), AbcManager()
    number, repeat = 1_000_000, 7
    t_plain, t_abc = [], []
    for _ in range(repeat):  # interleaved, so load hits both alike
        t_plain.append(timeit.timeit(lambda: isinstance(plain, PlainCross), number=number))
        t_abc.append(timeit.timeit(lambda: isinstance(abcm, AbcCross), number=number))
    base = timeit.timeit(lambda: None, number=number)
    p = (statistics.median(t_plain) - base) / number * 1e9
    a = (statistics.median(t_abc) - base) / number * 1e9
    print(f"isinstance(manager, CrossAttentionManager): plain class {p:.1f} ns, ABC {a:.1f} ns, "
          f"ratio {a / p:.1f}x (per check; a hybrid allocate_slots does 2 per group)")


if __name__ == "__main__":
    main()
