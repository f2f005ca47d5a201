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
