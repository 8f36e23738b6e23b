"""``plmbench perf``: our nets against their ``transformers`` counterparts, step by step.

For a model preset (any registered architecture), each step the families register
(``lit_models/measure/perf_registry.py``, ``lit_models/families/transformer_perf.py``: pretraining,
classification fine-tuning, inference) runs as our implementation and as
transformers' class with ``sdpa`` and with ``eager`` attention, same config, weights and batch, in
one process. Steps are timed interleaved (one step of each implementation in turn, so a
shared or throttling machine slows all of them alike) after warm-up; the median is reported as
non-pad tokens/s, with

- the FLOPs each implementation performs in a step (``torch.utils.flop_counter``: matmuls and
  attention, forward and backward), as achieved FLOP/s and model FLOP utilisation (MFU) against
  the device's peak (``lit_models/measure/peak_flops.py``: a datasheet table for A100/H100/H200, on
  CPU the measured peak of large matmuls on the same threads, in bf16 for ``--precision
  bf16-mixed``, which autocasts on CPU as on a GPU);
- memory: the bytes autograd saves for the backward (activations) and, on CUDA, the allocator's
  peak during a step above what it held before it.

    plmbench perf model=bert-mini-scratch [--steps pretrain,finetune,inference]
        [--attention sdpa,eager] [--batch-size 32] [--seq-len 128]
        [--precision 32-true|bf16-mixed] [--threads N] [--repeats 7] [--warmup 3] [--device cuda]
        [--json FILE]

Models that are no Transformer register steps of their own (``BASELINE_WORKLOADS``): ELMo's
biLM against the same biLM on ``torch.nn.LSTM`` (``lit_models/families/bilm_perf.py``), the GLUE
baselines' BiLSTM on its own (``lit_models/families/bilstm_perf.py``: its LSTM FLOPs counted by
hand).

``--lengths 512,1024,...`` measures instead the encoder's memory and time against sequence length
next to full attention (``bench/perf/length.py``: Longformer's linear cost); ``--generate`` the
generation throughput of a decoder or encoder-decoder, with and without the key/value cache,
against transformers' ``generate`` (``bench/perf/generation.py``).
"""

import argparse
import contextlib
from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from bench.perf.options import STEPS
from bench.perf.timing import saved_activation_bytes, step_memory, time_interleaved
from datamodules import strict_json
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from lit_models.archs import get_arch
from lit_models.families.perf_workloads import BASELINE_WORKLOADS, WORKLOADS, Workload, special_ids
from lit_models.measure.peak_flops import cpu_matmul_peak, device_peak_flops

aten = torch.ops.aten


def _cpu_flash(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query, key, value)


def _cpu_flash_backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out, query, key, value)


#: SDPA's CPU kernel, which torch's FLOP counter has no formula for (its CUDA kernels have)
CPU_ATTENTION_FLOPS = {aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash,
                       aten._scaled_dot_product_flash_attention_for_cpu_backward:
                           _cpu_flash_backward}


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bf16 autocast (fp32 weights, Lightning's bf16-mixed) or nothing (32-true)."""
    if precision == "bf16-mixed":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def runner(net: torch.nn.Module, run: Callable[[], torch.Tensor], train: bool,
           device: torch.device, precision: str) -> Callable[[], None]:
    """One timed unit: a training step (forward, backward, fused AdamW update, as
    configure_optimizer) or an inference forward without gradients."""
    if not train:
        net.eval()

        def forward() -> None:
            with torch.inference_mode(), autocast(device, precision):
                run()

        return forward
    net.train()
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, precision):
            loss = run()
        loss.backward()
        optimizer.step()

    return step


def step_flops(net: torch.nn.Module, run: Callable[[], torch.Tensor], train: bool,
               device: torch.device, precision: str) -> int:
    """FLOPs one step performs (matmuls and attention; forward and, training, backward)."""
    counter = FlopCounterMode(display=False, custom_mapping=CPU_ATTENTION_FLOPS)
    with counter, autocast(device, precision):
        if train:
            run().backward()
        else:
            with torch.no_grad():
                run()
    net.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def model_config(overrides: list[str]):
    """The model preset the Hydra overrides compose
    (``model=bert-mini-scratch model.hidden_size=...``)."""
    from bench.compose import check_given_once, compose_config

    fix = "pass plmbench perf's options (plmbench perf --help) and model=<preset> overrides"
    check_given_once(overrides, fix)
    return compose_config(overrides, fix).model


def arch_and_config(model_cfg):
    """The preset's architecture and net config: its own sizes for a scratch preset, its
    checkpoint's (config.json only: timing needs no trained weights) for ``hf:``/``ckpt:``."""
    from lit_models.core.build import net_config
    from lit_models.interop.hf import read_config

    arch, init_from = get_arch(model_cfg.arch), InitFrom.parse(model_cfg.init_from)
    if init_from.scratch:
        return arch, net_config(arch, model_cfg, model_cfg.vocab_size, special_ids(arch)["pad"])
    return read_config(init_from.directory(), arch)


def measure_workload(workload: Workload, device: torch.device, args) -> dict:
    """Time, FLOPs and memory of every implementation of ``workload``."""
    steps, results = {}, {}
    attention = set(args.attention)
    implementations = {name: impl for name, impl in workload.implementations.items()
                       if not name.startswith("transformers ") or name.split()[-1] in attention}
    for name, impl in implementations.items():
        flops = (step_flops(impl.net, impl.run, workload.train, device, args.precision)
                 + impl.uncounted_flops if impl.counted else results["plmbench"]["flops"])
        activations = saved_activation_bytes(impl.run) if workload.train else None
        steps[name] = runner(impl.net, impl.run, workload.train, device, args.precision)
        results[name] = {"flops": flops, "activation_mib": activations and activations / 2**20,
                         "uncounted": not impl.counted}
    seconds = time_interleaved(steps, device, args.warmup, args.repeats)
    for name, step in steps.items():
        r = results[name]
        r.update(step_ms=1e3 * seconds[name], tokens_per_s=workload.tokens / seconds[name],
                 tflops_per_s=r["flops"] / seconds[name] / 1e12,
                 step_peak_mib=step_memory(step, device))
        r["mfu"] = r["tflops_per_s"] * 1e12 / args.peak_flops if args.peak_flops else None
    ours = results["plmbench"]
    for r in results.values():
        r["speedup"] = ours["tokens_per_s"] / r["tokens_per_s"]
        r["flop_ratio"] = r["flops"] / ours["flops"]
    return {"step": workload.step, "shape": workload.shape, "tokens": workload.tokens,
            "results": results, "unavailable": {k: v for k, v in workload.unavailable.items()
                                                if k.split()[-1] in attention}}


def measure(args: argparse.Namespace, overrides: list[str]) -> dict:
    """The report: every requested step of the preset's architecture, each implementation."""
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    matmuls = torch.bfloat16 if args.precision == "bf16-mixed" else torch.float32
    args.peak_flops = (cpu_matmul_peak(torch.get_num_threads(), matmuls) if device.type == "cpu"
                       else device_peak_flops(device, matmuls))
    model_cfg = model_config(overrides)
    unknown = set(args.steps) - set(STEPS)
    if unknown:
        raise PlmbenchError(f"--steps {sorted(unknown)}: use some of {list(STEPS)}")
    if model_cfg.arch in BASELINE_WORKLOADS:  # a model that is no Transformer: its own steps
        name, builders = model_cfg.arch, BASELINE_WORKLOADS[model_cfg.arch]

        def build(step: str) -> Workload | None:
            return builders[step](model_cfg, args.batch_size, args.seq_len, device) if (
                step in builders) else None
    else:
        arch, config = arch_and_config(model_cfg)
        name = arch.name

        def build(step: str) -> Workload | None:
            return WORKLOADS[step](arch, config, args.batch_size, args.seq_len, device)
    workloads, skipped = [], []
    for step in args.steps:
        torch.manual_seed(0)
        workload = build(step)
        if workload is None:
            skipped.append(step)
            continue
        workloads.append(measure_workload(workload, device, args))
    return {"model": model_cfg.name, "arch": name, "device": _device_name(device),
            "threads": torch.get_num_threads(), "precision": args.precision,
            "peak_tflops": args.peak_flops and args.peak_flops / 1e12,
            "repeats": args.repeats, "warmup": args.warmup, "workloads": workloads,
            "skipped": skipped}


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _cell(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def render(report: dict) -> str:
    peak = report["peak_tflops"]
    matmuls = "bf16" if report["precision"] == "bf16-mixed" else "float32"
    source = f"measured {matmuls} matmul peak" if report["device"] == "cpu" else "datasheet peak"
    lines = [f"## {report['model']} ({report['arch']}), {report['device']} "
             f"({report['threads']} threads), {report['precision']}; MFU against "
             f"{_cell(peak, '.3f')} TFLOP/s ({source}); median of {report['repeats']} "
             f"interleaved steps after {report['warmup']} warm-up"]
    for w in report["workloads"]:
        lines += ["", f"### {w['step']}: batch {w['shape']} ({w['tokens']:,} tokens)", "",
                  "| implementation | tokens/s | step (ms) | TFLOP/s | MFU | activations (MiB) "
                  "| step memory (MiB) | plmbench speed-up | its FLOPs / ours |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, r in w["results"].items():
            lines.append(
                f"| {name} | {r['tokens_per_s']:,.0f} | {r['step_ms']:.1f} | "
                f"{r['tflops_per_s']:.3f} | {_cell(r['mfu'], '.1%')} | "
                f"{_cell(r['activation_mib'], '.0f')} | {_cell(r['step_peak_mib'], '.0f')} | "
                f"{r['speedup']:.2f}x | {r['flop_ratio']:.2f} |")
        lines += [f"\n{name}: not measured ({why})" for name, why in w["unavailable"].items()]
        lines += [f"\n{name}: FLOPs as ours (the same computation; torch's counter has no formula "
                  "for its fused kernel)" for name, r in w["results"].items() if r["uncounted"]]
    if report["skipped"]:
        lines.append(f"\nno {', '.join(report['skipped'])} step for {report['arch']} "
                     "(no classification head, or no reference implementation for it)")
    return "\n".join(lines)


def main(args: argparse.Namespace, overrides: list[str]) -> int:
    """``plmbench perf`` once its options are parsed (``bench/perf/options.py``)."""
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.generate:
        from bench.perf.generation import main as generation_main

        args.batch_size = args.batch_size or 8
        print(generation_main(args, model_config(overrides)))
        return 0
    if args.lengths:
        from bench.perf.length import main as length_main

        args.batch_size = args.batch_size or 1
        print(length_main(args, model_config(overrides)))
        return 0
    args.batch_size = args.batch_size or 32
    args.steps, args.attention = args.steps.split(","), args.attention.split(",")
    args.precision = args.precision or ("bf16-mixed" if args.device.startswith("cuda")
                                        else "32-true")
    report = measure(args, overrides)
    if args.json:
        args.json.write_text(strict_json.dumps(report, indent=2) + "\n")
    print(render(report))
    return 0
