"""The shared optimizer setup: AdamW parameter groups (no decay on biases and LayerNorm weights,
layer-wise lr decay as in ELECTRA, Clark et al. 2020, Appendix A) and the warmup + decay schedule
(BERT, Devlin et al. 2019, Appendix A.2). Expected values are computed here from the module
structure and the schedule formulas, not from the code under test."""

import math

import pytest
import torch
from torch import nn

from datamodules.errors import PlmbenchError
from lit_models.archs import get_arch
from lit_models.core.optim import configure_optimizer, lr_multiplier, param_groups
from lit_models.families.classify import LitClassifier
from lit_models.nets.bert import BertConfig, BertForPreTraining, BertModel
from lit_models.nets.heads import PooledClassifier

LR = 1e-3
DECAY = 0.5
WEIGHT_DECAY = 0.01
NUM_LAYERS = 3
TINY = dict(
    vocab_size=50,
    hidden_size=16,
    num_hidden_layers=NUM_LAYERS,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=32,
)


def optim_cfg(**overrides) -> dict:
    cfg = dict(
        lr=LR,
        weight_decay=WEIGHT_DECAY,
        betas=[0.9, 0.999],
        eps=1e-6,
        warmup_ratio=0.1,
        schedule="linear",
        layerwise_lr_decay=DECAY,
    )
    return cfg | overrides


def pretraining_net() -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(BertConfig(**TINY))


def classifier() -> LitClassifier:
    torch.manual_seed(0)
    config = BertConfig(**TINY)
    return LitClassifier(BertModel(config), get_arch("bert").capabilities,
                         PooledClassifier(config, 3, 0.1), 3, ["accuracy"], ["validation"],
                         optim_cfg())


def no_decay_params(module: nn.Module) -> set[int]:
    """Biases (any parameter called bias) and LayerNorm weights, found by module type."""
    ids = set()
    for sub in module.modules():
        for name, param in sub.named_parameters(recurse=False):
            if name == "bias" or isinstance(sub, nn.LayerNorm):
                ids.add(id(param))
    return ids


def trainable(module: nn.Module) -> dict[int, nn.Parameter]:
    return {id(p): p for p in module.parameters() if p.requires_grad}


def group_of(groups: list[dict]) -> dict[int, dict]:
    """param id -> its group; fails if a parameter sits in two groups."""
    out: dict[int, dict] = {}
    for group in groups:
        for param in group["params"]:
            assert id(param) not in out, "a parameter is in two groups"
            out[id(param)] = group
    return out


def expected_lrs(embeddings: nn.Module, layers: nn.ModuleList, everything: nn.Module):
    """param id -> lr * d^(L+1) for embeddings, lr * d^(L-i) for layer i, lr for the rest."""
    lrs = {id(p): LR for p in everything.parameters()}
    for p in embeddings.parameters():
        lrs[id(p)] = LR * DECAY ** (NUM_LAYERS + 1)
    for i, layer in enumerate(layers):
        for p in layer.parameters():
            lrs[id(p)] = LR * DECAY ** (NUM_LAYERS - i)
    return lrs


@pytest.mark.parametrize("make", [pretraining_net, classifier], ids=["pretraining", "classifier"])
def test_weight_decay_groups_cover_every_trainable_param_once(make):
    module = make()
    frozen = module.parameters().__next__()
    frozen.requires_grad_(False)
    groups = param_groups(module, optim_cfg(), NUM_LAYERS)
    assignment = group_of(groups)
    params = trainable(module)
    assert set(assignment) == set(params)  # every trainable param, frozen ones left out
    assert id(frozen) not in assignment
    no_decay = no_decay_params(module)
    assert no_decay and set(params) - no_decay  # both kinds exist in the model
    for pid, param in params.items():
        if pid in no_decay:
            assert param.ndim < 2
            assert assignment[pid]["weight_decay"] == 0.0
        else:
            assert param.ndim == 2
            assert assignment[pid]["weight_decay"] == WEIGHT_DECAY


def test_layerwise_lr_decay_on_bert_for_pretraining():
    net = pretraining_net()
    assert len(net.bert.encoder.layers) == NUM_LAYERS
    assignment = group_of(param_groups(net, optim_cfg(), NUM_LAYERS))
    expected = expected_lrs(net.bert.embeddings, net.bert.encoder.layers, net)
    # the tied MLM decoder weight is the token embedding: it counts (once) as an embedding
    tied = net.mlm_head.word_embeddings.weight
    assert expected[id(tied)] == pytest.approx(LR * DECAY ** (NUM_LAYERS + 1))
    for name, param in net.named_parameters():
        assert assignment[id(param)]["lr"] == pytest.approx(expected[id(param)], rel=1e-12), name
    # the heads train at the full rate
    for head in (net.mlm_head.dense, net.nsp_head, net.bert.pooler):
        for param in head.parameters():
            assert assignment[id(param)]["lr"] == pytest.approx(LR)
    # the parameter groups also split by weight decay, not only by depth
    assert {(g["weight_decay"], round(g["lr"] / LR, 9)) for g in assignment.values()} == {
        (wd, round(DECAY**k, 9)) for wd in (0.0, WEIGHT_DECAY) for k in range(NUM_LAYERS + 2)
    }


def test_layerwise_lr_decay_on_lit_classifier():
    module = classifier()
    assignment = group_of(param_groups(module, optim_cfg(), NUM_LAYERS))
    encoder = module.encoder
    expected = expected_lrs(encoder.embeddings, encoder.encoder.layers, module)
    for name, param in module.named_parameters():
        assert assignment[id(param)]["lr"] == pytest.approx(expected[id(param)], rel=1e-12), name
    assert assignment[id(module.head.out.weight)]["lr"] == pytest.approx(LR)


def test_no_layerwise_decay_gives_everyone_the_base_lr():
    net = pretraining_net()
    groups = param_groups(net, optim_cfg(layerwise_lr_decay=1.0), NUM_LAYERS)
    assert len(groups) == 2
    assert all(g["lr"] == LR for g in groups)
    assert sorted(g["weight_decay"] for g in groups) == [0.0, WEIGHT_DECAY]


# --- the schedule ------------------------------------------------------------------------------

TOTAL, WARMUP = 110, 10


@pytest.mark.parametrize("schedule", ["linear", "cosine", "constant"])
def test_linear_warmup_reaches_one_at_the_end_of_warmup(schedule):
    warm = [lr_multiplier(s, TOTAL, WARMUP, schedule) for s in range(WARMUP)]
    assert warm[0] > 0  # the first step already learns
    steps = [b - a for a, b in zip(warm, warm[1:], strict=False)]
    assert steps == pytest.approx([1 / WARMUP] * (WARMUP - 1))  # linear, reaching 1 in WARMUP
    assert max(warm) <= 1.0 + 1e-12
    assert lr_multiplier(WARMUP, TOTAL, WARMUP, schedule) == pytest.approx(1.0)


def test_linear_decay_to_zero_at_total():
    for k in range(0, TOTAL - WARMUP + 1, 7):
        expected = 1 - k / (TOTAL - WARMUP)
        assert lr_multiplier(WARMUP + k, TOTAL, WARMUP, "linear") == pytest.approx(expected)
    assert lr_multiplier(TOTAL, TOTAL, WARMUP, "linear") == pytest.approx(0.0, abs=1e-12)
    assert lr_multiplier(TOTAL + 5, TOTAL, WARMUP, "linear") == pytest.approx(0.0, abs=1e-12)


def test_cosine_is_half_at_mid_decay():
    mid = WARMUP + (TOTAL - WARMUP) // 2
    assert lr_multiplier(mid, TOTAL, WARMUP, "cosine") == pytest.approx(0.5)
    quarter = WARMUP + (TOTAL - WARMUP) // 4
    expected = 0.5 * (1 + math.cos(math.pi * 0.25))
    assert lr_multiplier(quarter, TOTAL, WARMUP, "cosine") == pytest.approx(expected)
    assert lr_multiplier(TOTAL, TOTAL, WARMUP, "cosine") == pytest.approx(0.0, abs=1e-12)


def test_constant_stays_one():
    for step in range(WARMUP, TOTAL + 20):
        assert lr_multiplier(step, TOTAL, WARMUP, "constant") == 1.0


def test_no_warmup_starts_at_one():
    assert lr_multiplier(0, TOTAL, 0, "linear") == pytest.approx(1.0)
    assert lr_multiplier(TOTAL // 2, TOTAL, 0, "linear") == pytest.approx(0.5)


@pytest.mark.parametrize("step", [0, WARMUP + 1])
def test_unknown_schedule_raises_during_and_after_warmup(step: int):
    with pytest.raises(PlmbenchError, match="exponential"):
        lr_multiplier(step, TOTAL, WARMUP, "exponential")


def test_unknown_schedule_is_rejected_before_training():
    with pytest.raises(PlmbenchError, match="exponential"):
        configure_optimizer(nn.Linear(4, 4), optim_cfg(schedule="exponential"), TOTAL, 0)


def reference_multiplier(step: int, total: int, warmup: int, schedule: str) -> float:
    """The documented schedule, written out: (step + 1) / warmup, then linear or cosine decay."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / (total - warmup))
    return 1 - progress if schedule == "linear" else 0.5 * (1 + math.cos(math.pi * progress))


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_configure_optimizer_lambda_lr_follows_the_formula(schedule):
    module = classifier()
    total = 40
    out = configure_optimizer(module, optim_cfg(schedule=schedule), total, NUM_LAYERS)
    optimizer, scheduler = out["optimizer"], out["lr_scheduler"]["scheduler"]
    assert isinstance(optimizer, torch.optim.AdamW)
    assert out["lr_scheduler"]["interval"] == "step"
    assert optimizer.defaults["betas"] == (0.9, 0.999)
    assert optimizer.defaults["eps"] == 1e-6
    base = [g["initial_lr"] for g in optimizer.param_groups]
    assert max(base) == pytest.approx(LR)
    assert min(base) == pytest.approx(LR * DECAY ** (NUM_LAYERS + 1))
    warmup = int(0.1 * total)
    for step in range(total + 3):
        factor = reference_multiplier(step, total, warmup, schedule)
        for group, lr0 in zip(optimizer.param_groups, base, strict=True):
            assert group["lr"] == pytest.approx(lr0 * factor, abs=1e-15), step
        for param in module.parameters():
            param.grad = torch.ones_like(param)
        optimizer.step()
        scheduler.step()


def test_adafactor_takes_t5s_step_sizes():
    """optim=adafactor composes to torch's Adafactor whose relative step rho_t = min(lr, 1/sqrt(t))
    scales a clipped, second-moment-normalised update by the parameter's RMS: with lr 0.01 the
    first update of a matrix of RMS 1 and a constant gradient is 0.01 in every entry (the update
    U = G / sqrt(V) is all ones, RMS 1, unclipped); an unknown name is one line."""
    from hydra import compose, initialize_config_dir

    from bench.run.execute import CONF_DIR

    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["optim=adafactor", "task.lr=0.01"]).optim
    layer = nn.Linear(4, 3, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([1.0, -1.0]).repeat(6).view(3, 4))  # RMS 1
    out = configure_optimizer(layer, cfg, TOTAL, 0)
    optimizer, scheduler = out["optimizer"], out["lr_scheduler"]["scheduler"]
    assert isinstance(optimizer, torch.optim.Adafactor)
    assert [g["lr"] for g in optimizer.param_groups] == [0.01]
    before = layer.weight.detach().clone()
    layer.weight.grad = torch.full_like(layer.weight, 0.5)
    optimizer.step()
    scheduler.step()
    assert torch.allclose(before - layer.weight.detach(), torch.full_like(before, 0.01))
    assert optimizer.param_groups[0]["lr"] == 0.01  # constant
    with pytest.raises(PlmbenchError, match="optim.name='sgd' is unknown"):
        configure_optimizer(layer, {**cfg, "name": "sgd"}, TOTAL, 0)
