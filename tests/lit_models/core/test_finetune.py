"""The fine-tuning methods (lit_models/core/finetune) on a tiny BERT classifier trained by
Lightning: a frozen encoder stays bit-identical while its head learns, chosen layers reach the
head as their sum or scalar mix, fresh adapters are the identity (the first forward equals the
frozen encoder's) and only adapters, layer norms and the head train, ULMFiT's learning rate per
layer group is 2.6 times the next lower one's, its groups unfreeze from the top one stage at a
time, and its slanted triangular schedule follows Howard & Ruder's eq. 3."""

import lightning as L
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from lit_models.core.finetune import FinetuneMethod
from lit_models.core.finetune.adapters import Adapters
from lit_models.core.finetune.frozen import Frozen
from lit_models.core.finetune.ulmfit import ULMFiT
from lit_models.core.optim import lr_multiplier, param_groups
from lit_models.nets.adapters import BottleneckAdapter
from lit_models.nets.t5 import T5Config, T5Model
from tests.lit_models.families.test_lightning_modules import (
    CONFIG,
    OPTIM,
    batch_of,
    classifier,
    separable,
    trainer,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers:UserWarning",
    "ignore:.*The number of training batches:UserWarning",
    "ignore:`isinstance.treespec, LeafSpec.` is deprecated:FutureWarning",
)


def with_method(method: FinetuneMethod, **kwargs):
    module = classifier(**kwargs)
    method.prepare(module.encoder)
    method.apply(module, module.encoder)
    return module


def fit(module, steps: int = 6, batch_size: int = 8) -> L.Trainer:
    fitted = trainer(max_steps=steps, num_sanity_val_steps=0, limit_val_batches=0)
    fitted.fit(module, DataLoader(separable(32, seed=0), batch_size=batch_size, shuffle=True))
    return fitted


def snapshot(net: nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in net.state_dict().items()}


@pytest.mark.parametrize("combine,layers", [("last", [-1]), ("mix", [0, 1, 2])])
def test_a_frozen_run_leaves_the_encoder_bit_identical_and_trains_the_head(combine, layers):
    module = with_method(Frozen(layers=layers, combine=combine))
    before, head_before = snapshot(module.encoder), snapshot(module.head)
    fit(module)
    after = module.encoder.state_dict()
    for name, tensor in before.items():
        if not name.startswith("frozen_features."):
            assert torch.equal(after[name], tensor), name
    assert not torch.equal(module.head.out.weight, head_before["out.weight"])
    assert not module.encoder.training  # no dropout in the frozen encoder, even while fitting
    mixed = [p for n, p in module.named_parameters() if n.startswith("encoder.frozen_features")]
    trained = sum(p.numel() for p in module.head.parameters()) + sum(p.numel() for p in mixed)
    assert FinetuneMethod.trained_parameters(module) == trained
    assert len(mixed) == (2 if combine == "mix" else 0)  # the mix's weights w and gamma


def test_frozen_layers_reach_the_head_summed_or_mixed():
    """The head reads the chosen layers' sum (Table 7's "sum last four"), or their scalar mix,
    which starts as their mean (w = 0, gamma = 1); other layers leave the output unchanged."""
    batch = batch_of(separable(4, seed=2))
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    plain = classifier().encoder.eval()
    states = plain(**inputs, output_hidden_states=True).hidden_states
    for combine, expected in (("sum", states[1] + states[2]), ("mix", (states[1] + states[2]) / 2)):
        module = with_method(Frozen(layers=[1, 2], combine=combine))
        output = module.encoder(**inputs)
        torch.testing.assert_close(output.last_hidden_state, expected)
        assert output.pooler_output is None and output.hidden_states is None
        assert module.encoder(**inputs, output_hidden_states=True).hidden_states is not None


@pytest.mark.parametrize("combine,layers,fix", [
    ("concat", [-2, -1], "bilstm"), ("last", [-2, -1], "sum or mix"), ("mean", [-1], "one of")])
def test_a_frozen_combination_the_head_cannot_read_is_one_line(combine, layers, fix):
    from datamodules.errors import PlmbenchError

    with pytest.raises(PlmbenchError, match=fix):
        Frozen(layers=layers, combine=combine)


def test_fresh_adapters_are_the_identity_and_only_they_norms_and_the_head_train():
    torch.manual_seed(1)
    module = classifier(dropout=0.0).eval()
    batch = batch_of(separable(6, seed=3))
    frozen = module(batch)
    Adapters(bottleneck=4).prepare(module.encoder)
    adapters = [m for m in module.encoder.modules() if isinstance(m, BottleneckAdapter)]
    assert len(adapters) == 2 * CONFIG["num_hidden_layers"]  # after attention and feed-forward
    torch.testing.assert_close(module(batch), frozen, rtol=0, atol=0)
    trained = {n for n, p in module.encoder.named_parameters() if p.requires_grad}
    assert trained and all("adapter" in n or "norm" in n for n in trained)
    assert all(p.requires_grad for p in module.head.parameters())
    adapter_size = 2 * CONFIG["num_hidden_layers"] * (2 * 4 * 32 + 4 + 32)
    norms = sum(p.numel() for n, p in module.encoder.named_parameters() if "norm" in n)
    head = sum(p.numel() for p in module.head.parameters())
    assert FinetuneMethod.trained_parameters(module) == adapter_size + norms + head
    before = snapshot(module.encoder)
    module.optim_cfg["lr"] = 1e-2
    fit(module)
    changed = {n for n, t in module.encoder.state_dict().items() if not torch.equal(t, before[n])}
    assert changed and changed <= trained  # the up-projections left zero: adapters learned
    assert any(".up." in n for n in changed)


def test_adapters_go_into_every_layer_of_an_encoder_decoder_with_cross_attention():
    net = T5Model(T5Config(vocab_size=50, d_model=16, d_kv=4, d_ff=32, num_layers=2,
                           num_decoder_layers=2, num_heads=4))
    Adapters(bottleneck=3).prepare(net)
    adapters = [m for m in net.modules() if isinstance(m, BottleneckAdapter)]
    assert len(adapters) == 2 * 2 + 3 * 2  # encoder: attention, ffn; decoder: + cross


def test_ulmfit_rates_fall_by_2_6_per_layer_group():
    module = classifier()
    cfg = dict(OPTIM, lr=1e-3, layerwise_lr_decay=1 / 2.6)
    groups = param_groups(module, cfg, num_layers=2)
    rate = {}
    for group in groups:
        for param in group["params"]:
            rate[param] = group["lr"]
    named = dict(module.named_parameters())
    head = rate[named["head.out.weight"]]
    top = rate[named["encoder.encoder.layers.1.feed_forward.linear1.weight"]]
    bottom = rate[named["encoder.encoder.layers.0.feed_forward.linear1.weight"]]
    embeddings = rate[named["encoder.embeddings.word_embeddings.weight"]]
    assert head == pytest.approx(1e-3)
    assert [top, bottom, embeddings] == pytest.approx([1e-3 / 2.6, 1e-3 / 2.6 ** 2,
                                                       1e-3 / 2.6 ** 3])


def test_ulmfit_unfreezes_one_group_per_stage_from_the_top():
    """Stage 0 trains the head (and pooler), each stage one layer more, the last the embeddings;
    a group not yet unfrozen keeps its pretrained weights."""
    module = with_method(ULMFiT(unfreeze_every=2))
    (unfreezing,) = module.finetune_callbacks
    assert module.optim_cfg["stlr_ratio"] == 32.0  # eq. 3's ratio, read by the schedule
    named = dict(module.named_parameters())
    before = snapshot(module.encoder)
    fit(module, steps=3)  # stages 0, 0, 1: the top layer trained once, the lower one never
    assert named["encoder.encoder.layers.1.attention.qkv.weight"].requires_grad
    assert not named["encoder.encoder.layers.0.attention.qkv.weight"].requires_grad
    after = module.encoder.state_dict()
    assert not torch.equal(after["encoder.layers.1.attention.qkv.weight"],
                           before["encoder.layers.1.attention.qkv.weight"])
    for name in ("encoder.layers.0.attention.qkv.weight", "embeddings.word_embeddings.weight"):
        assert torch.equal(after[name], before[name]), name
    assert [unfreezing.lowest_trained_depth(s) for s in range(5)] == [3, 2, 1, 0, 0]
    assert unfreezing.stage_at(epoch=7, step=5) == 2


def test_ulmfit_unfreezes_a_group_per_epoch_by_default():
    module = with_method(ULMFiT())
    fit(module, steps=8, batch_size=16)  # 32 examples: 2 steps an epoch, 4 epochs
    assert all(p.requires_grad for p in module.parameters())  # stage 3 reached the embeddings
    assert FinetuneMethod.trained_parameters(module) == sum(p.numel() for p in module.parameters())


def test_slanted_triangular_learning_rates_follow_eq_3():
    """T = 1000, cut_frac 0.1, ratio 32: lr / 32 at t = 0, lr at the cut (t = 100), then linear
    down to lr / 32 at T."""
    total, cut, ratio = 1000, 100, 32
    def rate(t):
        return lr_multiplier(t, total, cut, "slanted_triangular", ratio)
    p = {0: 0.0, 50: 0.5, 100: 1.0, 550: 0.5, 1000: 0.0}
    for t, expected_p in p.items():
        assert rate(t) == pytest.approx((1 + expected_p * (ratio - 1)) / ratio)
    assert rate(100) == 1.0 and rate(0) == pytest.approx(1 / 32)
