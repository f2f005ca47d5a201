"""Lab ``block_hash``: the learner writes hash_block_tokens, generate_block_hash_extra_keys and
get_request_block_hasher, byte-identical to vLLM 0.22.1's (sha256 and sha256_cbor).

Graded directly (vLLM's recorded hashes of block chains and of whole requests with LoRA,
multimodal items and cache_salt, then after appended tokens) and as the hasher of every request
in scheduler workloads, where a wrong hash shows as a block hash vLLM did not compute.

The catalogue recognises a wrong hash by recomputing the block's hash the ways learners get it
wrong (no parent, None for the first parent, no extra keys, the salt on every block, absolute
multimodal offsets) and finding the learner's value among them.
"""

from __future__ import annotations

from typing import Any

from kvlab.i18n import N_
from kvlab.labs.common import accept_functions, manager_scenarios, randomized, recorded
from kvlab.labs.direct import HashSide, record_hash_cases
from kvlab.labs.registry import Accepted, Lab, Misconception, register
from kvlab.labs.sides import ManagerSide

__all__ = ["LAB"]

NAMES = ("hash_block_tokens", "generate_block_hash_extra_keys", "get_request_block_hasher")
NB = "04_block_hashes_and_prefix_caching"


def _accept(value: Any) -> Accepted:
    return accept_functions(value, NAMES)


def _scenarios(seed: int) -> list:
    out = recorded("hash")
    out += recorded("manager", lambda rec: rec.config["extras"])
    for k, fn in enumerate(("sha256", "sha256_cbor")):
        def make(fn: str = fn, k: int = k) -> Any:
            from kvlab.labs.engine import hash_seeded

            with hash_seeded(fn):
                return record_hash_cases(HashSide({"hash_fn": fn}), fn, seed + k, 12)

        out.append(randomized(f"hash · {fn}", make))
    out += manager_scenarios(["full"], seed, 1, 40, extras=True)
    return out


def _learner_side(rec: Any, accepted: Accepted) -> Any:
    parts = accepted.parts
    if rec.kind == "hash":
        return HashSide(rec.config, hash_block_tokens=parts["hash_block_tokens"],
                        get_request_block_hasher=parts["get_request_block_hasher"])  # fmt: skip
    return ManagerSide(rec.config, hasher_factory=parts["get_request_block_hasher"])


def _reference_side(rec: Any) -> Any:
    return HashSide(rec.config) if rec.kind == "hash" else ManagerSide(rec.config)


# ------------------------------------------------------------------ recognising a wrong hash
def _hash_fn(div: Any) -> Any:
    from kvlab.core import kv_cache_utils

    return {"sha256": kv_cache_utils.sha256, "sha256_cbor": kv_cache_utils.sha256_cbor}[
        div.config.get("hash_fn", "sha256")]


def _first_bad(div: Any) -> tuple[int, list, list] | None:
    """(index, want hashes, got hashes) of the first differing block hash of a hashing result."""
    want, got = div.want, div.got
    if div.op == "request" and isinstance(got, list):  # [hashes at creation, after each append]
        for w, g in zip(want, got):
            if w != g:
                want, got = w, g
                break
    if not (isinstance(want, list) and isinstance(got, list)):
        return None
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            return i, want, got
    return (min(len(want), len(got)), want, got) if len(want) != len(got) else None


def _request(div: Any) -> Any:
    """A kvlab Request rebuilt from the divergent call's arguments (no hasher)."""
    from kvlab.labs.direct import kvlab_direct_namespace

    m = kvlab_direct_namespace()
    if div.op == "request":
        block_size, tokens, extra, appends = div.args
        tokens = list(tokens) + [t for a in appends for t in a]
    elif div.op == "add_request":
        _, tokens, _, extra = div.args
        block_size = div.config["hash_block_size"]
    else:
        return None, 0
    kwargs: dict = {}
    extra = extra or {}
    if extra.get("lora"):
        kwargs["lora_request"] = m.LoRARequest(extra["lora"][0], extra["lora"][1], "/lora")
    if extra.get("cache_salt"):
        kwargs["cache_salt"] = extra["cache_salt"]
    if extra.get("mm"):
        kwargs["mm_features"] = [m.MultiModalFeatureSpec(data=None, modality="image", identifier=i,
                                                         mm_position=m.PlaceholderRange(offset=o, length=n))
                                 for i, o, n in extra["mm"]]  # fmt: skip
    return m.Request("q", list(tokens), m.SamplingParams(max_tokens=8), None, **kwargs), block_size


def _candidates(div: Any) -> dict[str, bytes]:
    """The wrong hashes of the first differing block, by the mistake that makes each."""
    from kvlab.core import kv_cache_utils as kcu

    fn = _hash_fn(div)
    none = kcu.NONE_HASH
    out: dict[str, bytes] = {}
    if div.op == "hash_block_tokens":
        parent, tokens, extra = div.args
        extra = None if extra is None else tuple(tuple(k) if isinstance(k, list) else k for k in extra)
        out["no_chain"] = fn((none, tuple(tokens), extra))
        out["none_parent"] = fn((parent, tuple(tokens), extra)) if parent is None else b""
        out["list_tokens"] = fn((parent or none, list(tokens), extra))
        out["no_extra_keys"] = fn((parent or none, tuple(tokens), None)) if extra else b""
        return out
    bad = _first_bad(div)
    request, bs = _request(div)
    if bad is None or request is None:
        return out
    i, want, _ = bad
    parent = want[i - 1] if i > 0 else None
    tokens = tuple(request.all_token_ids[i * bs:(i + 1) * bs])
    extra, _ = kcu.generate_block_hash_extra_keys(request, i * bs, (i + 1) * bs, 0)
    out["no_chain"] = fn((none, tokens, extra))
    out["list_tokens"] = fn((parent or none, list(tokens), extra))
    if parent is None:
        out["none_parent"] = fn((None, tokens, extra))
    if extra:
        out["no_extra_keys"] = fn((parent or none, tokens, None))
    if request.cache_salt and i > 0:
        out["salt_every_block"] = fn((parent, tokens, (*(extra or ()), request.cache_salt)))
    if extra and any(isinstance(k, tuple) for k in extra):
        shifted = tuple((k[0], k[1] + i * bs) if isinstance(k, tuple) else k for k in extra)
        out["mm_absolute_offset"] = fn((parent or none, tokens, shifted))
    return out


def _got_hash(div: Any) -> Any:
    if div.op == "hash_block_tokens":
        return div.got
    bad = _first_bad(div)
    return None if bad is None or bad[0] >= len(bad[2]) else bad[2][bad[0]]


def _is(name: str) -> Any:
    def matches(div: Any) -> bool:
        got = _got_hash(div)
        return got is not None and _candidates(div).get(name) == got

    return matches


def _partial_block(div: Any) -> bool:
    bad = _first_bad(div)
    return bad is not None and len(bad[2]) > len(bad[1]) and bad[2][: len(bad[1])] == bad[1]


def _not_bytes(div: Any) -> bool:
    got = _got_hash(div)
    return got is not None and not isinstance(got, bytes)


def _rehash_all(div: Any) -> bool:
    bad = _first_bad(div)
    return bad is not None and len(bad[2]) > len(bad[1]) and len(set(bad[2])) < len(bad[2])


CATALOGUE = (
    Misconception("block_hash.not_bytes", N_("the hash function makes the block hash"),
                  N_("a block hash is the bytes hash_function returns (sha256: 32 bytes), never Python's hash() or a tuple: every process and every vLLM instance must agree on it"),
                  NB, N_("A chain of hashes"), _not_bytes),
    Misconception("block_hash.no_chain", N_("the hash is chained to the parent's"),
                  N_("the tuple hashed starts with the previous block's hash; without it two equal blocks under different prefixes would be one cache entry"),
                  NB, N_("Why chain"), _is("no_chain")),
    Misconception("block_hash.none_parent", N_("NONE_HASH is the first block's parent"),
                  N_("the first block of a request has no parent: vLLM chains it to NONE_HASH (set by init_none_hash), not to None"),
                  NB, N_("A chain of hashes"), _is("none_parent")),
    Misconception("block_hash.list_tokens", N_("the block's tokens are hashed as a tuple"),
                  N_("sha256 pickles what it hashes: a list and a tuple of the same tokens give different bytes, so vLLM converts the block's tokens to a tuple"),
                  NB, N_("A chain of hashes"), _is("list_tokens")),
    Misconception("block_hash.rehash_all", N_("the hasher returns only the new blocks' hashes"),
                  N_("the Request appends what request_block_hasher returns to request.block_hashes: start after the blocks already hashed"),
                  NB, N_("A chain of hashes"), _rehash_all),
    Misconception("block_hash.partial_block", N_("only full blocks are hashed"),
                  N_("a partial block can still grow; only blocks with block_size tokens get a hash (the rest waits for more tokens)"),
                  NB, N_("Why only full blocks"), _partial_block),
    Misconception("block_hash.salt_every_block", N_("cache_salt keys the first block only"),
                  N_("the salt separates tenants at the first block; every later block inherits it through the chain"),
                  NB, N_("Extra keys: same tokens, different cache entries"), _is("salt_every_block")),
    Misconception("block_hash.mm_absolute_offset", N_("a multimodal key is (identifier, offset from the block start)"),
                  N_("the same image at another position of the block must hash differently, so its offset is counted from the block's first token (it may be negative when the image started in an earlier block)"),
                  NB, N_("Extra keys: same tokens, different cache entries"), _is("mm_absolute_offset")),
    Misconception("block_hash.no_extra_keys", N_("extra keys: same tokens, different cache entries"),
                  N_("a LoRA adapter's name, the multimodal items in the block and the cache_salt go into the hashed tuple, so the same tokens under another adapter or image do not hit"),
                  NB, N_("Extra keys: same tokens, different cache entries"), _is("no_extra_keys")),
)  # fmt: skip

LAB = register(Lab(
    name="block_hash",
    title=N_("vLLM's chained block hashes, extra keys and the request block hasher"),
    notebook="lab03_block_hash",
    accept=_accept,
    scenarios=_scenarios,
    learner_side=_learner_side,
    reference_side=_reference_side,
    catalogue=CATALOGUE,
    after=("04_block_hashes_and_prefix_caching",),
))  # fmt: skip
