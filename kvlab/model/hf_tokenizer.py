"""Read a Hugging Face folder's tokenizer files: tokenizer.json, tokenizer_config.json, template.

Where each fact comes from (first found wins):

* vocabulary, merges, pre-tokenizer, BOS post-processor: ``tokenizer.json``;
* bos/eos tokens: ``tokenizer_config.json`` (``bos_token``/``eos_token``), then ``config.json`` ids;
* extra eos ids: ``generation_config.json`` / ``config.json`` ``eos_token_id`` (int or list);
* chat template: ``chat_template.jinja``, then ``tokenizer_config.json`` ``chat_template`` (a
  string, or a list of ``{"name", "template"}`` whose "default" entry is used).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _token_content(value: Any) -> str | None:
    if isinstance(value, dict):
        return value.get("content")
    return value


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]


def _chat_template(folder: Path, tok_config: dict[str, Any]) -> str | None:
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    template = tok_config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template}
        return named.get("default")
    return template


def read_hf_tokenizer(folder: Path) -> tuple[Any, int | None, tuple[int, ...], str | None]:
    """Load ``folder``'s tokenizer.

    Returns:
        ``(backend, bos_token_id, eos_token_ids, chat_template)``; ``backend`` is a
        ``tokenizers.Tokenizer``.

    Raises:
        FileNotFoundError: no tokenizer.json in ``folder``.
    """
    from tokenizers import Tokenizer

    path = folder / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder} has no tokenizer.json (only fast-tokenizer files are "
                                "read)")
    backend = Tokenizer.from_file(str(path))
    tok_config = _read_json(folder / "tokenizer_config.json")
    model_config = _read_json(folder / "config.json")
    gen_config = _read_json(folder / "generation_config.json")

    bos_text = _token_content(tok_config.get("bos_token"))
    bos_id = backend.token_to_id(bos_text) if bos_text else None
    if bos_id is None:
        bos_id = model_config.get("bos_token_id")
    eos_ids: list[int] = []
    eos_text = _token_content(tok_config.get("eos_token"))
    if eos_text and backend.token_to_id(eos_text) is not None:
        eos_ids.append(backend.token_to_id(eos_text))
    eos_ids += _ids(gen_config.get("eos_token_id")) + _ids(model_config.get("eos_token_id"))
    return backend, bos_id, tuple(dict.fromkeys(eos_ids)), _chat_template(folder, tok_config)
