"""``plmbench perf --lengths``: memory and time of one forward + backward against sequence length,
for a preset's encoder and the same sizes with full attention.

Beltagy et al. 2020 (Longformer), §3 and Figure 1: full self-attention costs O(n^2) in time and
memory, the sliding window O(n w). For each length, one encoder forward + backward (loss: the mean
square of the last hidden state; batch of random tokens, no padding) is timed after warm-up (the
median of the repeats) and its memory read as the bytes autograd saves for backward and, on
CUDA, the allocator's peak. The full-attention net is the architecture ``--against`` names
(default RoBERTa, Longformer's full-attention twin: same embeddings and layers) built from the
same preset fields, so the two differ in their attention only (and Longformer's global
projections, unused without global tokens).

    plmbench perf --lengths 512,1024,2048,4096 model=longformer-tiny-scratch \
        model.max_position_embeddings=4098
"""

import argparse
import dataclasses

import torch

from bench.perf.timing import saved_activation_bytes, time_steps
from datamodules.errors import PlmbenchError
from lit_models.archs import get_arch
from lit_models.core.build import PRESET_KEYS, net_config
from lit_models.measure.perf_registry import special_ids


def encoders(model_cfg, against: str, device: torch.device) -> dict[str, torch.nn.Module]:
    """The preset's encoder and the ``against`` architecture's, of the same sizes."""
    nets = {}
    for name in (model_cfg["arch"], against):
        arch = get_arch(name)
        fields = model_cfg
        if name != model_cfg["arch"]:  # the sizes both have (Longformer's window is no RoBERTa's)
            known = {f.name for f in dataclasses.fields(arch.config)} | PRESET_KEYS
            fields = {key: value for key, value in model_cfg.items() if key in known}
        config = net_config(arch, fields, model_cfg["vocab_size"], special_ids(arch)["pad"])
        try:
            nets[name] = arch.encoder(config, add_pooling_layer=False).to(device).train()
        except ValueError as err:
            raise PlmbenchError(f"model={model_cfg['name']}: {err}") from None
    return nets


def length_scaling(model_cfg, lengths: list[int], against: str, batch_size: int,
                   device: torch.device, warmup: int, repeats: int) -> dict[int, dict]:
    """length -> net -> {step_ms, activation_mib, peak_mib}."""
    nets = encoders(model_cfg, against, device)
    too_long = [n for n in lengths if any(n > net.config.max_length for net in nets.values())]
    if too_long:
        raise PlmbenchError(f"lengths {too_long} exceed the positions of "
                            f"model={model_cfg['name']}; raise model.max_position_embeddings")
    results: dict[int, dict] = {}
    for length in lengths:
        ids = torch.randint(len(special_ids(get_arch(against))), model_cfg["vocab_size"],
                            (batch_size, length), device=device)
        results[length] = {}
        for name, net in nets.items():
            def loss(net=net, ids=ids) -> torch.Tensor:
                return net(input_ids=ids).last_hidden_state.float().pow(2).mean()

            def step(net=net, loss=loss) -> None:
                net.zero_grad(set_to_none=True)
                loss().backward()

            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            seconds = time_steps(step, device, warmup, repeats)
            results[length][name] = {
                "step_ms": 1e3 * seconds,
                "activation_mib": saved_activation_bytes(loss) / 2**20,
                "peak_mib": torch.cuda.max_memory_allocated(device) / 2**20
                if device.type == "cuda" else None,
            }
    return results


def render(results: dict[int, dict], args: argparse.Namespace, model: str, arch: str) -> str:
    against = args.against
    lines = [
        f"### {model} ({arch}) vs full attention ({against}), batch {args.batch_size}, "
        f"{args.device} ({torch.get_num_threads()} threads), forward + backward, median of "
        f"{args.repeats} after {args.warmup} warm-up",
        "",
        f"| tokens | {arch} (ms) | full (ms) | {arch} activations (MiB) | full activations (MiB) "
        f"| {arch} peak (MiB) | full peak (MiB) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for length, r in results.items():
        ours, full = r[arch], r[against]
        peaks = [f"{x['peak_mib']:.0f}" if x["peak_mib"] is not None else "–" for x in (ours, full)]
        lines.append(f"| {length} | {ours['step_ms']:.0f} | {full['step_ms']:.0f} | "
                     f"{ours['activation_mib']:.0f} | {full['activation_mib']:.0f} | "
                     f"{peaks[0]} | {peaks[1]} |")
    return "\n".join(lines)


def main(args: argparse.Namespace, model_cfg) -> str:
    lengths = [int(n) for n in args.lengths.split(",")]
    device = torch.device(args.device)
    torch.manual_seed(0)
    results = length_scaling(model_cfg, lengths, args.against, args.batch_size, device,
                             args.warmup, args.repeats)
    return render(results, args, model_cfg["name"], model_cfg["arch"])
