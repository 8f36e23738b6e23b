"""``plmbench perf``: the measurement runs end to end on a tiny preset, and the two implementations
it times compute the same thing: before any training step, our masked-LM loss (vocabulary logits
at the masked positions only) equals transformers' ``BertForMaskedLM`` loss on the same batch.

The tests build the nets, batch and loss functions with the same functions (and seed) that
``measure`` times; ``test_measure_reports_both_implementations`` checks that through the number of
predicted tokens that ``flop_ratio`` depends on.
"""

import argparse

import pytest
import torch

from bench.perf import loss_functions, measure, ours_and_reference, perf_batch, render
from datamodules.errors import PlmbenchError
from lit_models.flops import EncoderShape, mlm_training_flops
from lit_models.objectives.mlm import IGNORE_INDEX
from tests.conftest import require

transformers = require("transformers")

OVERRIDES = ["model=bert-tiny"]
#: a tiny preset of every registered architecture with a transformers masked-LM counterpart
PRESETS = ["bert-tiny", "roberta-tiny", "albert-tiny", "distilbert-tiny"]
TOLERANCE = 1e-5



def model_cfg(overrides: list[str] = OVERRIDES):
    from hydra import compose, initialize_config_dir

    from bench.run import CONF_DIR

    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides).model


def nets_and_batch(batch_size: int, seq_len: int, preset: str = "bert-tiny"):
    """The nets and batch ``measure`` times (same seed, same order of draws)."""
    torch.manual_seed(0)
    cfg = model_cfg([f"model={preset}"])
    arch, config, ours, reference = ours_and_reference(cfg, torch.device("cpu"))
    batch = perf_batch(arch, config, batch_size, seq_len, torch.device("cpu"))
    return config, ours.eval(), reference.eval(), batch


@pytest.mark.parametrize("preset", PRESETS)
def test_measure_reports_both_implementations(preset):
    args = argparse.Namespace(batch_size=2, seq_len=16, repeats=1, warmup=1, device="cpu")
    results = measure(args, [f"model={preset}"])
    for name in ("plmbench", "transformers"):
        r = results[name]
        assert r["tokens_per_s"] > 0
        assert r["step_ms"] > 0
        assert r["tokens_per_s"] == pytest.approx(2 * 16 / (r["step_ms"] / 1e3))
        assert r["tflops_per_s"] > 0
        assert r["activation_mib"] > 0
        assert r["peak_mib"] is None  # CPU: no allocator peak
    assert results["speedup"] == pytest.approx(
        results["plmbench"]["tokens_per_s"] / results["transformers"]["tokens_per_s"]
    )
    assert results["flop_ratio"] > 1  # the reference decodes every position, we the masked ones
    # the ratio is (all positions) / (masked positions) of the same step: it matches our copy of
    # measure's batch, so the parity test below sees the batch measure times
    config, _, _, batch = nets_and_batch(2, 16, preset)
    labels = batch["labels"]
    shape = EncoderShape.of(config)
    predicted = int((labels != IGNORE_INDEX).sum())
    assert 0 < predicted < 2 * 16
    every_position = mlm_training_flops(shape, 2, 16, 2 * 16)
    expected = every_position / mlm_training_flops(shape, 2, 16, predicted)
    assert results["flop_ratio"] == pytest.approx(expected, rel=1e-12)
    table = render(results, args, "bert-tiny")
    assert "| plmbench |" in table and "| transformers |" in table


def test_measure_rejects_a_pretrained_preset():
    args = argparse.Namespace(batch_size=2, seq_len=16, repeats=1, warmup=1, device="cpu")
    with pytest.raises(PlmbenchError, match="scratch"):
        measure(args, [*OVERRIDES, "model.init_from=hf:/nonexistent"])


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize(("batch_size", "seq_len"), [(2, 16), (8, 64)])
def test_our_mlm_loss_equals_transformers_before_training(batch_size, seq_len, preset):
    """The two loss functions perf times compute the same loss, and agree with transformers'
    own ``labels=`` loss, so the speed-up compares equal work."""
    config, ours, reference, batch = nets_and_batch(batch_size, seq_len, preset)
    labels = batch["labels"]
    selected = labels != IGNORE_INDEX
    assert selected.any()
    losses = loss_functions(ours, reference, batch)
    with torch.no_grad():
        our_loss, their_loss = losses["plmbench"](), losses["transformers"]()
        out = reference(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                        labels=labels)
        hidden = ours(input_ids=batch["input_ids"]).last_hidden_state
        our_logits = ours.mlm_head(hidden[selected])
    assert out.loss.item() == pytest.approx(their_loss.item(), abs=1e-6)  # same loss definition
    assert abs(our_loss.item() - their_loss.item()) <= TOLERANCE
    assert (our_logits - out.logits[selected]).abs().max().item() <= TOLERANCE


def test_gradients_agree_so_both_train_the_same_weights():
    """One backward on each: the tied token embeddings (encoder input and vocabulary decoder) and
    the vocabulary bias get the same gradient, so a timed step updates the same parameters."""
    _, ours, reference, batch = nets_and_batch(4, 32)
    for loss in loss_functions(ours, reference, batch).values():
        loss().backward()
    pairs = [
        (ours.bert.embeddings.word_embeddings.weight,
         reference.bert.embeddings.word_embeddings.weight),
        (ours.mlm_head.bias, reference.cls.predictions.bias),
        (ours.mlm_head.dense.weight, reference.cls.predictions.transform.dense.weight),
        (ours.bert.encoder.layers[0].attention.out.weight,
         reference.bert.encoder.layer[0].attention.output.dense.weight),
    ]
    for mine, theirs in pairs:
        assert mine.grad is not None and theirs.grad is not None
        scale = theirs.grad.abs().max().item()
        assert scale > 0
        assert (mine.grad - theirs.grad).abs().max().item() <= 1e-4 * scale


def test_reference_gets_every_weight_of_ours():
    """ours_and_reference loads with strict=False: the only keys it may leave unloaded are the
    decoder's, and those must be tied to the loaded embeddings and vocabulary bias."""
    from lit_models.hf import hf_state_dict

    torch.manual_seed(0)
    _, _, ours, reference = ours_and_reference(model_cfg(), torch.device("cpu"))
    result = reference.load_state_dict(hf_state_dict(ours), strict=False)
    assert set(result.missing_keys) <= {"cls.predictions.decoder.weight",
                                        "cls.predictions.decoder.bias"}
    predictions = reference.cls.predictions
    assert predictions.decoder.weight is reference.bert.embeddings.word_embeddings.weight
    assert predictions.decoder.bias is predictions.bias
    # what is left over belongs to heads BertForMaskedLM does not have
    assert all(k.startswith(("bert.pooler.", "cls.seq_relationship.")) for k in
               result.unexpected_keys)


@pytest.mark.parametrize("preset", PRESETS)
def test_parity_holds_with_random_biases_and_layer_norms(preset):
    """At initialisation every bias is 0 and every LayerNorm is the identity, so a mix-up among
    them would not show; with all weights random (loaded the way ours_and_reference loads
    them) the losses still agree."""
    from lit_models.hf import hf_state_dict

    config, ours, reference, batch = nets_and_batch(4, 32, preset)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in ours.parameters():
            param.copy_(0.5 * torch.randn(param.shape, generator=generator))
    reference.load_state_dict(hf_state_dict(ours), strict=False)
    losses = loss_functions(ours, reference, batch)
    with torch.no_grad():
        our_loss, their_loss = losses["plmbench"]().item(), losses["transformers"]().item()
    uniform = torch.log(torch.tensor(float(config.vocab_size))).item()
    assert our_loss > uniform + 1  # the random weights shape the logits
    assert our_loss == pytest.approx(their_loss, rel=TOLERANCE)
