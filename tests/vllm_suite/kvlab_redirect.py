"""A pytest plugin that makes vLLM's own tests run against kvlab: ``pytest -p kvlab_redirect``.

Before any test module is imported it replaces vLLM 0.22.1's KV-cache modules in ``sys.modules`` (and
as attributes of their parent packages) by kvlab's mirrors, so ``from vllm.v1.core.block_pool import
BlockPool`` in vLLM's unmodified test files gives kvlab's class. Everything else (config, sampling
params, utilities) stays vLLM's. Only usable where vLLM 0.22.1 is importable.
"""
from __future__ import annotations

import importlib
import os
import sys

# vLLM module -> kvlab module (module for module, names for names).
REDIRECTS = {
    "vllm.v1.kv_cache_interface": "kvlab.core.kv_cache_interface",
    "vllm.v1.request": "kvlab.core.request",
    "vllm.v1.core.kv_cache_utils": "kvlab.core.kv_cache_utils",
    "vllm.v1.core.block_pool": "kvlab.core.block_pool",
    "vllm.v1.core.single_type_kv_cache_manager": "kvlab.core.single_type_kv_cache_manager",
    "vllm.v1.core.kv_cache_coordinator": "kvlab.core.kv_cache_coordinator",
    "vllm.v1.core.kv_cache_manager": "kvlab.core.kv_cache_manager",
    "vllm.v1.core.kv_cache_metrics": "kvlab.core.kv_cache_metrics",
    "vllm.v1.worker.block_table": "kvlab.worker.block_table",
}
if os.environ.get("KVLAB_REDIRECT_SCHED") == "1":
    REDIRECTS.update({
        "vllm.v1.core.sched.scheduler": "kvlab.core.sched.scheduler",
        "vllm.v1.core.sched.output": "kvlab.core.sched.output",
    })


EVENT_CLASSES = ("BlockStored", "BlockRemoved", "AllBlocksCleared")


def install() -> dict[str, str]:
    """Put kvlab's modules in place of vLLM's; returns what was redirected."""
    import vllm

    if not vllm.__version__.startswith("0.22.1"):
        raise RuntimeError(f"kvlab_redirect needs vLLM 0.22.1, found {vllm.__version__}")
    already = [name for name in REDIRECTS if name in sys.modules]
    if already:
        raise RuntimeError(f"kvlab_redirect: vLLM modules imported before the redirect: {already}")
    done = {}
    for vname, kname in REDIRECTS.items():
        kmod = importlib.import_module(kname)
        parent, _, child = vname.rpartition(".")
        sys.modules[vname] = kmod
        setattr(importlib.import_module(parent), child, kmod)
        done[vname] = kname
    # The KV events kvlab's pool emits: vLLM's tests compare with isinstance against the classes
    # of vllm.distributed.kv_events (which also holds publishers kvlab does not mirror), so only
    # the event classes are served by kvlab there.
    events = importlib.import_module("vllm.distributed.kv_events")
    kevents = importlib.import_module("kvlab.core.kv_events")
    for name in EVENT_CLASSES:
        setattr(events, name, getattr(kevents, name))
        done[f"vllm.distributed.kv_events.{name}"] = f"kvlab.core.kv_events.{name}"
    return done


REDIRECTED = install()


def pytest_report_header(config):
    return [f"kvlab_redirect: {len(REDIRECTED)} vLLM modules served by kvlab"]
