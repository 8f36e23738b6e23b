"""The architecture contract (``suite.py``) for every architecture in the registry, on its tiny
preset, and on the variants of a preset whose checkpoints take another layout (ALBERT without
layer sharing: a group per layer; T5 v1.1: the gated feed-forward's ``wi_0``/``wi_1`` and an
output layer of its own) or another computation (DeBERTa-v2's settings, each on odd sizes:
distances unbucketed and clipped, keys of their own, P unnormalised, absolute positions in the
input, one position term; v2-xlarge's convolution layer; the released MLM head's names;
ModernBERT's mean pooling and the released attention pattern with an odd window)."""

import pytest

from lit_models.archs import ARCHS, Arch
from tests.contracts.suite import ArchContracts, tiny_preset

ODD = {"hidden_size": 36, "num_attention_heads": 3, "intermediate_size": 50,
       "num_hidden_layers": 3}
VARIANTS = [
    ("albert", {"sharing": "none"}),
    ("deberta_v2", {**ODD, "position_buckets": -1, "max_relative_positions": 5,
                    "share_att_key": False, "norm_rel_ebd": "none",
                    "position_biased_input": True, "pos_att_type": ["c2p"]}),
    ("deberta_v2", {**ODD, "position_buckets": 6, "max_relative_positions": 10,
                    "share_att_key": False, "pos_att_type": ["p2c"], "conv_kernel_size": 3,
                    "conv_act": "gelu", "conv_groups": 3, "legacy": False}),
    ("t5", {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}),
    # mean pooling (the released checkpoints'), the released pattern (a global layer, two local
    # ones), an odd window
    ("modernbert", {"classifier_pooling": "mean", "num_hidden_layers": 3,
                    "global_attn_every_n_layers": 3, "local_attention": 5}),
]
CASES = [(name, {}) for name in sorted(ARCHS)] + VARIANTS


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
