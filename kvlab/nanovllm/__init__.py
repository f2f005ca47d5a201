"""kvlab.nanovllm: nano-vllm's BlockManager, the simple prefix cache vLLM V1 is read against.

Mirrors nano-vllm at commit 82f5ca2, the version study note 004 reads, file for file (named
after nano-vllm's own package, ``nanovllm``):

==============================  ===========================================================
kvlab file                      nano-vllm file (what it holds)
==============================  ===========================================================
``engine/block_manager.py``     ``nanovllm/engine/block_manager.py``: Block (``NanoBlock``),
                                BlockManager (``NanoBlockManager``), ``compute_hash``
``engine/sequence.py``          ``nanovllm/engine/sequence.py``: Sequence (``NanoSequence``),
                                reduced to what the BlockManager reads
``instrument.py``               none: kvlab's counters (``NanoStats``) and recorded hash keys
``recording.py``                none: the manager recorded as a kvlab trace (``record_nano``,
                                ``nano_state``, ``nano_config``), drawn by kvlab's views
==============================  ===========================================================

What differs from nano-vllm: the classes carry a ``Nano`` prefix (they sit next to vLLM's
classes of the same names in the views and the comparison); bad calls raise a clear
ValueError and change nothing (nano-vllm asserts or fails midway); ``block_size`` must be at
least 2; sequences have a string ``request_id`` and take the block size as an argument; the
manager remembers which sequences hold blocks (for the viewers) and reports every change to an
optional recorder. Decisions (which block, which hash, which map entry) are nano-vllm's.

The comparison harness (``kvlab.compare``) runs it next to vLLM V1 and SGLang's radix cache;
the trace adapter ``kvlab.trace.designs.nano_vllm`` tells the views how to draw it.

Examples:
    >>> from kvlab.nanovllm import NanoBlockManager, NanoSequence
    >>> mgr = NanoBlockManager(num_blocks=4, block_size=2)
    >>> a = NanoSequence("a", [1, 2, 3, 4, 5], block_size=2); mgr.allocate(a); a.block_table
    [0, 1, 2]
"""

from kvlab.nanovllm.engine.block_manager import (
    NO_HASH,
    NanoBlock,
    NanoBlockManager,
    compute_hash,
)
from kvlab.nanovllm.engine.sequence import NanoSequence
from kvlab.nanovllm.instrument import NanoStats, hash_key
from kvlab.nanovllm.recording import NANO_CALLS, nano_config, nano_state, record_nano

__all__ = [
    "NANO_CALLS", "NO_HASH", "NanoBlock", "NanoBlockManager", "NanoSequence", "NanoStats",
    "compute_hash", "hash_key", "nano_config", "nano_state", "record_nano",
]  # fmt: skip
