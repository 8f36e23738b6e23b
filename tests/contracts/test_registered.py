"""The architecture contract (``suite.py``) for every architecture in the registry, on its tiny
preset, and on the variants of a preset whose checkpoints take another layout (ALBERT without
layer sharing: a group per layer; T5 v1.1: the gated feed-forward's ``wi_0``/``wi_1`` and an
output layer of its own) or another computation (ModernBERT's mean pooling and attention
pattern)."""

import pytest

from lit_models.archs import ARCHS, Arch
from tests.contracts.suite import ArchContracts, tiny_preset

VARIANTS = {"albert": {"sharing": "none"},
            "t5": {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False},
            # mean pooling (the released checkpoints'), the released pattern (a global layer,
            # two local ones), an odd window
            "modernbert": {"classifier_pooling": "mean", "num_hidden_layers": 3,
                           "global_attn_every_n_layers": 3, "local_attention": 5}}
CASES = [(name, {}) for name in sorted(ARCHS)] + sorted(VARIANTS.items())


class TestRegistered(ArchContracts):
    @pytest.fixture(params=CASES, ids=lambda case: "-".join(
        [case[0], *(f"{k}={v}" for k, v in case[1].items())]))
    def case(self, request) -> tuple[str, dict]:
        return request.param

    @pytest.fixture
    def arch(self, case) -> Arch:
        return ARCHS[case[0]]

    @pytest.fixture
    def preset(self, arch, case):
        return {**tiny_preset(arch), **case[1]}
