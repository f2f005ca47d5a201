"""kvlab: learn, teach and debug vLLM V1's KV-cache management by running it.

``import kvlab`` needs no torch: the KV-cache manager (``kvlab.core``) and traces
(``kvlab.trace``) are pure Python. The engine names (``LLM``, ``SamplingParams``) load torch on
first use.

Examples:
    >>> from kvlab import LLM, SamplingParams                    # needs kvlab[model]
    >>> llm = LLM(num_gpu_blocks=64)                              # SmolLM2-135M on kvlab's cache
    >>> llm.generate(["The capital of France is"], SamplingParams(max_tokens=2))[0].text
    ' Paris.'
    >>> llm.trace                                                 # every KV-cache decision
"""

import logging

from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SlidingWindowSpec,
    get_request_block_hasher,
    init_none_hash,
    sha256,
)
from kvlab._version import __version__
from kvlab.trace import KVState, Recorder, Trace, check_invariants, explain, load_trace

# NOTE: kvlab.core logs what vLLM logs (e.g. a refused reset_prefix_cache); stay quiet unless
# the application configures logging.
logging.getLogger("kvlab").addHandler(logging.NullHandler())

_LAZY = {
    "LLM": "kvlab.model.engine",
    "SamplingParams": "kvlab.model.engine",
    "RequestOutput": "kvlab.model.engine",
    "Model": "kvlab.model",
}

__all__ = [
    "FullAttentionSpec", "KVCacheConfig", "KVCacheGroupSpec", "KVCacheManager", "KVState", "LLM",
    "Model", "Recorder", "Request", "RequestOutput", "SamplingParams", "SlidingWindowSpec",
    "Trace", "check_invariants", "explain", "get_request_block_hasher", "init_none_hash",
    "load_trace", "sha256",
]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kvlab' has no attribute {name!r}")
