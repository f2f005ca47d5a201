"""A pytest plugin that lets vLLM's tests build their configs on this CPU machine: ``-p vllm_env``.

Two things vLLM's test files expect of a GPU development machine with internet:

* vLLM's CPU platform. The vLLM wheel is the CUDA build, which on a machine without a GPU finds no
  platform ("Failed to infer device type" from every ``VllmConfig``); this plugin sets
  ``vllm.platforms.current_platform`` to ``CpuPlatform`` before any test module imports it.
* The model configs the tests name.

vLLM's tests build ``ModelConfig("facebook/opt-125m")`` (and Qwen/Qwen3-0.6B, Qwen/Qwen1.5-7B,
llava-hf/llava-1.5-7b-hf), which reads the model's ``config.json`` from the Hugging Face hub.
The hub is not reachable here, so this plugin lays out an offline hub cache holding, per model, a stand-in
``config.json`` with the public config's architecture fields (``hf_stand_ins/ORG--NAME.json``;
no weights, no tokenizer) and turns the hub's offline mode on. The KV-cache and scheduler tests
read only sizes from it (max_model_len, layers, heads, vocab). The runner loads it on both sides
(real vLLM and kvlab), so the comparison is like for like.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent / "hf_stand_ins"
REVISION = "0" * 40


def install() -> Path:
    """Build the offline cache under a fresh temporary HF_HOME and point the hub at it."""
    home = Path(tempfile.mkdtemp(prefix="kvlab-hf-"))
    for config in sorted(HERE.glob("*.json")):
        repo = config.stem  # "ORG--NAME"
        root = home / "hub" / f"models--{repo}"
        snapshot = root / "snapshots" / REVISION
        snapshot.mkdir(parents=True)
        shutil.copy(config, snapshot / "config.json")
        (root / "refs").mkdir()
        (root / "refs" / "main").write_text(REVISION)
    os.environ["HF_HOME"] = str(home)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    return home


def use_cpu_platform() -> str:
    """Make vLLM's current_platform the CPU platform (before anything reads it)."""
    import vllm.platforms
    from vllm.platforms.cpu import CpuPlatform

    vllm.platforms.current_platform = CpuPlatform()
    return type(vllm.platforms.current_platform).__name__


HF_HOME = install()
PLATFORM = use_cpu_platform()


def pytest_report_header(config):
    return [f"vllm_env: platform {PLATFORM}, offline hub cache at {HF_HOME}"]


# vLLM's root conftest (tests/conftest.py), which the runner does not load (--confcutdir), holds
# three fixtures the suite's files take: ``dist_init`` (a one-process distributed group; here on
# the CPU's backend, gloo, instead of NCCL), ``default_vllm_config`` and ``caplog_vllm``. The same
# fixtures here. (``image_urls`` is not: the one file that takes it starts an LLM.)
import logging  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture()
def dist_init():
    """A world of one process (tensor and pipeline parallel size 1), torn down after the test;
    a default VllmConfig is current meanwhile unless the test set one (as vLLM's fixture)."""
    import contextlib

    from vllm.config import VllmConfig, get_current_vllm_config_or_none, set_current_vllm_config
    from vllm.distributed import cleanup_dist_env_and_memory, init_distributed_environment
    from vllm.distributed.parallel_state import initialize_model_parallel

    fd, store = tempfile.mkstemp()
    os.close(fd)
    current = contextlib.nullcontext() if get_current_vllm_config_or_none() is not None \
        else set_current_vllm_config(VllmConfig())  # fmt: skip
    try:
        with current:
            init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                         distributed_init_method=f"file://{store}")  # fmt: skip
            initialize_model_parallel(1, 1)
            yield
        cleanup_dist_env_and_memory()
    finally:
        if os.path.exists(store):
            os.unlink(store)


@pytest.fixture
def default_vllm_config():
    """A default VllmConfig set as the current one for the test."""
    from vllm.config import VllmConfig, set_current_vllm_config

    config = VllmConfig()
    with set_current_vllm_config(config):
        yield config


@pytest.fixture()
def caplog_vllm(caplog):
    """``caplog`` that sees vLLM's log records (vLLM's logger does not propagate to the root)."""
    logger = logging.getLogger("vllm")
    before = logger.propagate
    logger.propagate = True
    try:
        yield caplog
    finally:
        logger.propagate = before
