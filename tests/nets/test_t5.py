"""T5's relative position buckets follow §2.1; the presets have the papers' sizes (parity with
transformers for T5 and v1.1, with and without an output layer of its own:
``tests/nets/test_parity.py``; exports of both, cached decoding and the other contracts:
``tests/contracts``)."""

import pytest
import torch

from lit_models.archs import get_arch
from lit_models.nets.t5 import T5ForConditionalGeneration, relative_position_bucket

T5 = get_arch("t5")


def test_relative_position_buckets_follow_the_definition():
    """§2.1 with 32 buckets up to 128: bidirectional, offsets 0..7 exact, keys after the query in
    buckets 16 on; 8..127 logarithmic; beyond 128 one bucket per direction. Causal: only the
    past counts, 0..15 exact."""
    offsets = torch.tensor([0, -1, -7, -8, -15, -16, -127, -128, -1000, 1, 7, 8, 128, 1000])
    both = relative_position_bucket(offsets, True, 32, 128).tolist()
    assert both[:3] == [0, 1, 7] and both[9:11] == [17, 23]
    assert all(8 <= b <= 15 for b in both[3:9]) and both[7] == both[8] == 15
    assert all(24 <= b <= 31 for b in both[11:]) and both[12] == both[13] == 31
    assert both[3] < both[5] < both[6]  # wider ranges farther away
    causal = relative_position_bucket(offsets, False, 32, 128).tolist()
    assert causal[:5] == [0, 1, 7, 8, 15] and causal[8] == 31 and causal[9:] == [0] * 5


@pytest.mark.parametrize(("preset", "parameters"), [("t5-small-scratch", 60_506_624),
                                                     ("t5-base-scratch", 222_903_552)])
def test_presets_have_the_papers_sizes(preset, parameters):
    """T5-small ~60M and T5-base ~220M (§3.7, Table 14), with the 32,128-entry vocabulary."""
    from omegaconf import OmegaConf

    from bench.run.execute import CONF_DIR
    from lit_models.core.build import net_config

    cfg = OmegaConf.load(CONF_DIR / "model" / f"{preset}.yaml")
    with torch.device("meta"):
        net = T5ForConditionalGeneration(net_config(T5, cfg, cfg.vocab_size, 0))
    assert sum(p.numel() for p in net.parameters()) == parameters
