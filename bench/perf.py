"""``plmbench perf``: MLM pretraining-step throughput of our net against ``transformers``.

Both implementations get the same config, weights, batch and masks, in one process: a full
training step (forward, backward, AdamW update) is timed after warm-up, and the median of the
repeats is reported as tokens/s, with the achieved model FLOP/s (lit_models/flops.py counts
what each one computes: ours applies the vocabulary decoder at the masked positions only, the
architecture's ``*ForMaskedLM`` at every position) and the memory the step keeps: bytes saved for
backward (activations) and, on CUDA, the allocator's peak. Any registered architecture with a
transformers counterpart: ``model=<preset>`` picks it.

    plmbench perf model=bert-mini [--batch-size 32] [--seq-len 128] [--repeats 7] [--device cpu]

``--lengths 512,1024,...`` measures instead the encoder's memory and time against sequence length
next to full attention (``bench/perf_length.py``: Longformer's linear cost); ``--generate`` the
generation throughput of a decoder or encoder-decoder, with and without the key/value cache,
against transformers' ``generate`` (``bench/perf_generation.py``).
"""

import argparse
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict

import torch
import torch.nn.functional as F

from datamodules.errors import PlmbenchError
from lit_models.archs import Arch, get_arch
from lit_models.flops import EncoderShape, mlm_training_flops
from lit_models.objectives.mlm import MaskingConfig, mask_tokens, masked_lm_loss


def saved_activation_bytes(step: Callable[[], torch.Tensor]) -> int:
    """Bytes of the tensors autograd saves for backward in one forward (activation memory)."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return sum(seen.values())


def time_steps(step: Callable[[], None], device: torch.device, warmup: int, repeats: int) -> float:
    """Median seconds of one call of ``step`` after ``warmup`` calls."""
    times = []
    for i in range(warmup + repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def special_ids(arch: Arch) -> dict[str, int]:
    """Role -> id of a scratch vocabulary of ``arch`` (its special tokens come first)."""
    return {role: i for i, (role, _) in enumerate(arch.tokenizer.tokens)}


def ours_and_reference(model_cfg, device: torch.device):
    """Our pretraining net and transformers' masked-LM model of the same architecture, with
    identical weights."""
    import transformers

    from lit_models.build import net_config
    from lit_models.hf import hf_state_dict

    arch = get_arch(model_cfg["arch"])
    config = net_config(arch, model_cfg, model_cfg["vocab_size"], special_ids(arch)["pad"])
    ours = arch.pretraining(config).to(device)
    layout = arch.hf
    hf_config = transformers.AutoConfig.for_model(
        layout.model_type,
        **{k: v for k, v in asdict(config).items() if k not in layout.config_only_ours},
        attn_implementation="sdpa",
    )
    reference = getattr(transformers, layout.classes["mlm"])(hf_config).to(device)
    missing, unexpected = reference.load_state_dict(hf_state_dict(ours), strict=False)
    # tied copies are no weights of their own, and the masked-LM model has no pooler nor other
    # pretraining heads (a misnamed masked-LM weight would show up missing); any other weight
    # left out would void the comparison
    skipped = re.compile(layout.skipped)
    missing = [k for k in missing if not skipped.search(k)]
    unexpected = [k for k in unexpected if not (
        k.removeprefix(layout.prefix).startswith("pooler.") or k.startswith(layout.head_prefixes))]
    if missing or unexpected:
        raise RuntimeError(f"weights not carried over: missing {missing}, unexpected {unexpected}")
    return arch, config, ours, reference


def perf_batch(arch: Arch, config, batch_size: int, seq_len: int, device: torch.device) -> dict:
    """A full-length batch (cls, random tokens, sep) masked as MLM pretraining masks it."""
    roles = special_ids(arch)
    ids = torch.randint(len(roles), config.vocab_size, (batch_size, seq_len))
    ids[:, 0], ids[:, -1] = roles["cls"], roles["sep"]
    special = torch.zeros(config.vocab_size, dtype=torch.bool)
    special[: len(roles)] = True
    corrupted, labels = mask_tokens(ids, special, MaskingConfig(), config.vocab_size,
                                    mask_id=roles["mask"])
    return {
        "input_ids": corrupted.to(device),
        "attention_mask": torch.ones_like(corrupted).to(device),
        "labels": labels.to(device),
    }


def loss_functions(ours, reference, batch: dict) -> dict[str, Callable[[], torch.Tensor]]:
    """The MLM loss of each implementation on ``batch``: ours over the masked positions only,
    transformers' over logits at every position (as its *ForMaskedLM computes them)."""
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    labels = batch["labels"]

    def our_loss() -> torch.Tensor:
        return masked_lm_loss(ours(**inputs).last_hidden_state, labels, ours.mlm_head)

    def reference_loss() -> torch.Tensor:
        logits = reference(**inputs).logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))

    return {"plmbench": our_loss, "transformers": reference_loss}


def training_step(net: torch.nn.Module, loss_fn: Callable[[], torch.Tensor]) -> Callable[[], None]:
    """One AdamW training step of ``net`` on ``loss_fn`` (the unit ``plmbench perf`` times)."""
    net.train()
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)  # as configure_adamw

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn().backward()
        optimizer.step()

    return step


def model_config(overrides: list[str]):
    """The model preset the Hydra overrides compose (``model=bert-mini model.hidden_size=...``)."""
    from hydra import compose, initialize_config_dir

    from bench.run import CONF_DIR

    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides).model


def measure(args: argparse.Namespace, overrides: list[str]) -> dict:
    model_cfg = model_config(overrides)
    if model_cfg.init_from != "scratch":
        raise PlmbenchError(
            f"perf needs a scratch preset (model=bert-mini ...), not {model_cfg.name}"
        )
    device = torch.device(args.device)
    torch.manual_seed(0)
    arch, config, ours, reference = ours_and_reference(model_cfg, device)
    shape = EncoderShape.of(config)
    batch = perf_batch(arch, config, args.batch_size, args.seq_len, device)
    losses = loss_functions(ours, reference, batch)
    predicted = int((batch["labels"] != -100).sum())
    every_position = args.batch_size * args.seq_len

    results = {}
    for name, net, flops_positions in (
        ("plmbench", ours, predicted),
        ("transformers", reference, every_position),
    ):
        step = training_step(net, losses[name])
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        seconds = time_steps(step, device, args.warmup, args.repeats)
        flops = mlm_training_flops(shape, args.batch_size, args.seq_len, flops_positions)
        results[name] = {
            "tokens_per_s": every_position / seconds,
            "step_ms": 1e3 * seconds,
            "tflops_per_s": flops / seconds / 1e12,
            "activation_mib": saved_activation_bytes(losses[name]) / 2**20,
            "peak_mib": torch.cuda.max_memory_allocated(device) / 2**20
            if device.type == "cuda"
            else None,
        }
    results["speedup"] = (
        results["plmbench"]["tokens_per_s"] / results["transformers"]["tokens_per_s"]
    )
    results["flop_ratio"] = mlm_training_flops(
        shape, args.batch_size, args.seq_len, every_position
    ) / mlm_training_flops(shape, args.batch_size, args.seq_len, predicted)
    return results


def render(results: dict, args: argparse.Namespace, model: str) -> str:
    threads = torch.get_num_threads()
    lines = [
        f"### {model}, batch {args.batch_size} x {args.seq_len} tokens, {args.device} "
        f"({threads} threads), median of {args.repeats} steps after {args.warmup} warm-up",
        "",
        "| implementation | tokens/s | step (ms) | model TFLOP/s | activations (MiB) "
        "| peak (MiB) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in ("plmbench", "transformers"):
        r = results[name]
        peak = f"{r['peak_mib']:.0f}" if r["peak_mib"] is not None else "–"
        lines.append(
            f"| {name} | {r['tokens_per_s']:,.0f} | {r['step_ms']:.0f} | "
            f"{r['tflops_per_s']:.3f} | {r['activation_mib']:.0f} | {peak} |"
        )
    lines += [
        "",
        f"speed-up {results['speedup']:.2f}x (the FLOP count alone allows "
        f"{results['flop_ratio']:.2f}x)",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="plmbench perf", description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=None, help="32 (--lengths: 1)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--lengths", help="e.g. 512,1024,2048,4096: encoder forward+backward "
                        "memory and time against full attention (bench/perf_length.py)")
    parser.add_argument("--against", default="roberta",
                        help="--lengths: the full-attention architecture of the same sizes")
    parser.add_argument("--generate", action="store_true", help="generation tokens/s with and "
                        "without the cache vs transformers' generate (bench/perf_generation.py)")
    parser.add_argument("--new-tokens", type=int, default=64, help="--generate: tokens per row")
    parser.add_argument("--beams", type=int, default=1, help="--generate: 1 = greedy")
    args, overrides = parser.parse_known_args(argv)
    if args.generate:
        from bench.perf_generation import main as generation_main

        args.batch_size = args.batch_size or 8
        print(generation_main(args, model_config(overrides)))
        return 0
    if args.lengths:
        from bench.perf_length import main as length_main

        args.batch_size = args.batch_size or 1
        print(length_main(args, model_config(overrides)))
        return 0
    args.batch_size = args.batch_size or 32
    results = measure(args, overrides)
    model = next((o.split("=", 1)[1] for o in overrides if o.startswith("model=")), "bert-tiny")
    print(render(results, args, model))
    return 0
