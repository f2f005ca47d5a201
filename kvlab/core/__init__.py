"""kvlab.core: a faithful, instrumented re-implementation of vLLM 0.22.1's V1 KV-cache manager.

Mirrors ``vllm/v1/core`` module for module. Pure Python (standard library, xxhash, cbor2).
"""
