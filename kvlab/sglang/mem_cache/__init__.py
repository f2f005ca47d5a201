"""SGLang's ``srt/mem_cache``: the radix tree, its token pool and the request life cycle."""
