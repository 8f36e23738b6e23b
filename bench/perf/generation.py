"""``plmbench perf --generate``: generation throughput of a decoder or encoder-decoder preset,
ours with and without the key/value cache, against transformers' ``generate`` with the same
settings, weights and prompts.

The net is the preset's LM (random weights, scratch sizes), transformers' model of the
registration's ``classes["pretraining"]`` (BartForConditionalGeneration, GPT2LMHeadModel,
T5ForConditionalGeneration) loaded with the same weights. Prompts are random non-special tokens,
``--batch-size`` x ``--seq-len`` (the source of an encoder-decoder, the context of a decoder),
unpadded. Every row generates exactly ``--new-tokens`` tokens (``min_new_tokens`` equal to
``max_new_tokens``: the end token is never chosen), greedily or with ``--beams`` beams, so every
implementation does the same work; tokens/s counts generated tokens (batch x new tokens), the
median of ``--repeats`` calls after ``--warmup``. The table also says whether each output equals
ours with the cache (it should: ``tests/lit_models/test_generation*.py``).

    plmbench perf --generate model=gpt2-small-scratch [--batch-size 8 --seq-len 128 --new-tokens 64]
"""

import argparse
from dataclasses import asdict

import torch

from bench.perf.timing import time_steps
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from lit_models.archs import Arch, get_arch
from lit_models.core.build import net_config
from lit_models.core.generation import GenerationConfig, generate
from lit_models.interop.hf import hf_state_dict
from lit_models.measure.perf_registry import special_ids

IMPLEMENTATIONS = ("plmbench", "plmbench, no cache", "transformers", "transformers, no cache")


def language_models(arch: Arch, model_cfg, device: torch.device):
    """(our LM, transformers' LM with the same weights) of a decoder or encoder-decoder preset
    of ``arch``."""
    import transformers

    if arch.kind == "encoder":
        raise PlmbenchError(f"perf --generate needs a decoder or encoder-decoder preset; "
                            f"{model_cfg['name']} is an encoder")
    config = net_config(arch, model_cfg, model_cfg["vocab_size"], special_ids(arch)["pad"])
    ours = arch.pretraining(config).to(device).eval()
    layout = arch.hf
    hf_config = transformers.AutoConfig.for_model(
        layout.model_type,
        **{k: v for k, v in asdict(config).items() if k not in layout.config_only_ours},
        attn_implementation="sdpa",
    )
    reference = getattr(transformers, layout.classes["pretraining"])(hf_config).to(device).eval()
    weights = hf_state_dict(arch, ours)
    missing, unexpected = reference.load_state_dict(weights, strict=False)
    # what is left is tied to a loaded weight (shared embeddings, a tied LM head)
    tensors = reference.state_dict(keep_vars=True)
    loaded = {tensors[k].data_ptr() for k in weights if k in tensors}
    missing = [k for k in missing if tensors[k].data_ptr() not in loaded]
    if missing or unexpected:
        raise RuntimeError(f"weights not carried over: missing {missing}, unexpected {unexpected}")
    return ours, reference


def measure(model_cfg, args: argparse.Namespace) -> dict[str, dict]:
    """implementation -> {tokens_per_s, call_ms, same_ids, new_tokens (per row)}."""
    device = torch.device(args.device)
    torch.manual_seed(0)
    arch = get_arch(model_cfg["arch"])
    ours, reference = language_models(arch, model_cfg, device)
    config = ours.config
    specials = len(special_ids(arch))
    ids = torch.randint(specials, config.vocab_size, (args.batch_size, args.seq_len),
                        device=device)
    mask = torch.ones_like(ids)
    settings = dict(num_beams=args.beams, max_new_tokens=args.new_tokens,
                    min_new_tokens=args.new_tokens)
    start = {"decoder_start_token_id": config.decoder_start_token_id} if arch.encoder_decoder \
        else {}
    prompt = 1 if arch.encoder_decoder else args.seq_len  # transformers returns it too

    def ours_with(use_cache: bool):
        return lambda: generate(arch, ours, ids, mask, GenerationConfig(**settings,
                                                                       use_cache=use_cache))

    def theirs_with(use_cache: bool):
        def call() -> torch.Tensor:
            with torch.no_grad():
                out = reference.generate(
                    input_ids=ids, attention_mask=mask, do_sample=False, use_cache=use_cache,
                    eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id,
                    forced_bos_token_id=None, forced_eos_token_id=None, **start, **settings)
            return out[:, prompt:]
        return call

    calls = dict(zip(IMPLEMENTATIONS, (ours_with(True), ours_with(False), theirs_with(True),
                                       theirs_with(False)), strict=True))
    expected = calls["plmbench"]()
    results = {}
    for name, call in calls.items():
        seconds = time_steps(call, device, args.warmup, args.repeats)
        out = call()
        results[name] = {
            "tokens_per_s": args.batch_size * args.new_tokens / seconds,
            "call_ms": 1e3 * seconds,
            "same_ids": torch.equal(out, expected),
            "new_tokens": out.shape[1],
        }
    return results


def render(results: dict[str, dict], args: argparse.Namespace, model: str) -> str:
    search = "greedy" if args.beams == 1 else f"beam search, {args.beams} beams"
    lines = [
        f"### {model}, batch {args.batch_size} x {args.seq_len} prompt tokens, "
        f"{args.new_tokens} new tokens, {search}, {args.device} ({torch.get_num_threads()} "
        f"threads), median of {args.repeats} after {args.warmup} warm-up",
        "",
        "| implementation | generated tokens/s | call (ms) | ids equal to plmbench's |",
        "|---|---:|---:|---|",
    ]
    for name in IMPLEMENTATIONS:
        r = results[name]
        lines.append(f"| {name} | {r['tokens_per_s']:,.0f} | {r['call_ms']:.0f} | "
                     f"{'yes' if r['same_ids'] else 'NO'} |")
    rate = {name: r["tokens_per_s"] for name, r in results.items()}
    lines += ["", f"cache speed-up {rate['plmbench'] / rate['plmbench, no cache']:.2f}x; "
              f"plmbench / transformers (cached) {rate['plmbench'] / rate['transformers']:.2f}x"]
    return "\n".join(lines)


def main(args: argparse.Namespace, model_cfg) -> str:
    if not InitFrom.parse(model_cfg.init_from).scratch:
        raise PlmbenchError(f"perf needs a scratch preset, not {model_cfg.name}")
    return render(measure(model_cfg, args), args, model_cfg.name)
