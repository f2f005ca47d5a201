from __future__ import annotations

import pytest
import torch

from kvlab.model.sampling import SamplingParams, sample


def test_greedy_is_argmax() -> None:
    logits = torch.tensor([0.1, 3.0, -2.0, 2.9])
    assert sample(logits, SamplingParams(), None) == 1


def test_top_k_one_and_tiny_top_p_are_argmax() -> None:
    logits = torch.randn(50, generator=torch.Generator().manual_seed(0))
    best = int(logits.argmax())
    gen = torch.Generator().manual_seed(1)
    assert all(sample(logits, SamplingParams(temperature=1.0, top_k=1), gen) == best for _ in range(20))
    assert all(sample(logits, SamplingParams(temperature=1.0, top_p=1e-6), gen) == best
               for _ in range(20))


def test_seeded_sampling_is_reproducible_and_spread() -> None:
    logits = torch.zeros(8)
    p = SamplingParams(temperature=1.0)
    a = [sample(logits, p, torch.Generator().manual_seed(7)) for _ in range(3)]
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    s1 = [sample(logits, p, g1) for _ in range(40)]
    s2 = [sample(logits, p, g2) for _ in range(40)]
    assert s1 == s2
    assert len(set(a)) == 1
    assert len(set(s1)) > 3          # uniform logits: many different tokens


def test_top_k_restricts_support() -> None:
    logits = torch.tensor([5.0, 4.0, 3.0, -1.0, -2.0])
    gen = torch.Generator().manual_seed(0)
    seen = {sample(logits, SamplingParams(temperature=5.0, top_k=2), gen) for _ in range(200)}
    assert seen == {0, 1}


@pytest.mark.parametrize("kw", [dict(temperature=-0.5), dict(top_k=-1), dict(top_p=0.0),
                                dict(top_p=1.5), dict(max_tokens=0)])
def test_bad_params_raise(kw) -> None:
    with pytest.raises(ValueError):
        SamplingParams(**kw)


def test_eos_comes_from_the_tokenizer_unless_ignored() -> None:
    class Tok:
        eos_token_id = 2

    assert SamplingParams().for_tokenizer(Tok()).eos_token_id == 2
    assert SamplingParams(ignore_eos=True).for_tokenizer(Tok()).eos_token_id is None
    assert SamplingParams(eos_token_id=9).for_tokenizer(Tok()).eos_token_id == 9
