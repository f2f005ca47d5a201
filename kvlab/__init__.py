"""kvlab: learn, teach and debug vLLM V1's KV-cache management by running it."""

__version__ = "0.1.0"
