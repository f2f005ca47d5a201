"""nano-vllm's ``nanovllm/engine``: the files kvlab mirrors (block_manager.py, sequence.py)."""
