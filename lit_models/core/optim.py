"""The optimizer setup every LightningModule shares.

AdamW (Loshchilov & Hutter 2019) with no weight decay on biases and LayerNorm weights, linear
warmup then linear (BERT, Devlin et al. 2019, Appendix A.2), cosine or constant schedule, and
optional layer-wise learning-rate decay (ELECTRA, Clark et al. 2020, Appendix A): the parameters
of layer l of L get lr * decay^(L + 1 - l), embeddings count as layer 0 and heads as layer L + 1.

``optim.schedule: slanted_triangular`` is ULMFiT's (Howard & Ruder 2018, §3.2, eq. 3): a short
linear increase over the first cut = cut_frac x T steps (``warmup_ratio``), then a long linear
decay, from lr / ratio to lr and back: lr_t = lr (1 + p (ratio - 1)) / ratio, p = t / cut before
the cut, 1 - (t - cut) / (T - cut) after it (``stlr_ratio``, 32 in the paper, which
``finetune=ulmfit`` sets).

``optim.name: adafactor`` is T5's optimizer (Raffel et al. 2020, §3.1.2; Shazeer & Stern 2018):
torch's ``Adafactor`` with factored second moments, beta2_t = 1 - t^-0.8, updates clipped to RMS
d and scaled by the parameter's RMS, step size rho_t = min(lr_t, 1/sqrt(t)). With a constant lr
of 0.01 that is T5's pretraining schedule 1/sqrt(max(t, 10^4)); 0.001 its fine-tuning constant.

Gradients are clipped as BERT clips them (``tf.clip_by_global_norm`` in its ``optimization.py``):
every gradient times clip_norm / max(||g||, clip_norm), ||g|| the L2 norm of all of them together.
"""

import math
import re
from collections.abc import Iterable, Mapping

import torch
from torch import nn

from datamodules.errors import PlmbenchError

SCHEDULES = ("linear", "cosine", "constant", "slanted_triangular")
OPTIMIZERS = ("adamw", "adafactor", "adagrad")
_LAYER = re.compile(r"\blayers\.(\d+)\.")


def layer_depth(name: str, num_layers: int) -> int:
    """Depth of a parameter for layer-wise lr decay: 0 = embeddings, i + 1 = encoder layer i,
    num_layers + 1 = everything above the encoder (pooler, heads)."""
    if "embeddings" in name:
        return 0
    match = _LAYER.search(name)
    return int(match.group(1)) + 1 if match else num_layers + 1


def param_groups(module: nn.Module, cfg: Mapping, num_layers: int) -> list[dict]:
    """AdamW parameter groups: (decay | no decay) x depth, each with its own lr."""
    groups: dict[tuple[bool, int], dict] = {}
    decay_rate = cfg.get("layerwise_lr_decay", 1.0)
    for name, param in module.named_parameters():
        if not param.requires_grad:
            continue
        no_decay = param.ndim < 2  # biases and LayerNorm weights
        depth = layer_depth(name, num_layers) if decay_rate != 1.0 else num_layers + 1
        key = (no_decay, depth)
        if key not in groups:
            groups[key] = {
                "params": [],
                "weight_decay": 0.0 if no_decay else cfg["weight_decay"],
                "lr": cfg["lr"] * decay_rate ** (num_layers + 1 - depth),
            }
        groups[key]["params"].append(param)
    return list(groups.values())


def lr_multiplier(step: int, total_steps: int, warmup_steps: int, schedule: str,
                  ratio: float = 32.0) -> float:
    """Linear warmup to 1 over ``warmup_steps``, then ``schedule`` down to 0 at ``total_steps``;
    the slanted triangle (``ratio``: how much smaller its lowest rate is) rises over them."""
    if schedule not in SCHEDULES:
        raise PlmbenchError(f"optim.schedule={schedule!r} is unknown: use one of {list(SCHEDULES)}")
    if schedule == "slanted_triangular":
        cut = max(1, warmup_steps)
        p = step / cut if step < cut else 1 - (step - cut) / max(1, total_steps - cut)
        return (1 + max(0.0, p) * (ratio - 1)) / ratio
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    if schedule == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))  # cosine


def fusable(groups: list[dict]) -> bool:
    """Whether torch's fused AdamW kernel (one kernel for all tensors, on CPU and CUDA) applies:
    on CPU it takes a per-tensor update loop that costs ~20% of a small model's step down to ~3%."""
    return all(p.device.type in ("cpu", "cuda") for group in groups for p in group["params"])


def clip_by_global_norm(parameters: Iterable[nn.Parameter], clip_norm: float) -> torch.Tensor:
    """Scale the gradients in place by clip_norm / max(global norm, clip_norm), as BERT does, and
    return the global norm before clipping. No host-device synchronisation: the factor stays a
    device tensor. A non-finite norm makes the gradients NaN, as in BERT (a gradient scaler has
    found the overflow already and skips the step)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.zeros(())
    device = grads[0].device
    norms = [norm.to(device, torch.float32) for norm in torch._foreach_norm(grads)]
    total = torch.linalg.vector_norm(torch.stack(norms))
    factor = clip_norm / total.clamp(min=clip_norm)
    for on_device in {g.device for g in grads}:
        group = [g for g in grads if g.device == on_device]
        torch._foreach_mul_(group, factor.to(on_device))
    return total


def make_optimizer(groups: list[dict], cfg: Mapping) -> torch.optim.Optimizer:
    """``cfg.name``'s optimizer (AdamW unless it says adafactor) over the parameter groups."""
    name = cfg.get("name", "adamw")
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=cfg["lr"], betas=tuple(cfg["betas"]), eps=cfg["eps"],
                                 fused=fusable(groups))
    if name == "adafactor":
        return torch.optim.Adafactor(groups, lr=cfg["lr"], beta2_decay=cfg["beta2_decay"],
                                     eps=tuple(cfg["eps"]), d=cfg["clip_threshold"])
    if name == "adagrad":
        return torch.optim.Adagrad(groups, lr=cfg["lr"], eps=cfg["eps"],
                                   initial_accumulator_value=cfg["initial_accumulator_value"])
    raise PlmbenchError(f"optim.name={name!r} is unknown: use one of {list(OPTIMIZERS)} "
                        "(optim=adamw | optim=adafactor | optim=adagrad)")


def configure_optimizer(module: nn.Module, cfg: Mapping, total_steps: int,
                        num_layers: int) -> dict:
    """What ``LightningModule.configure_optimizers`` returns: the optimizer (``make_optimizer``)
    and a per-step LambdaLR."""
    optimizer = make_optimizer(param_groups(module, cfg, num_layers), cfg)
    warmup = int(cfg["warmup_ratio"] * total_steps)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_multiplier(step, total_steps, warmup, cfg["schedule"],
                                              cfg.get("stlr_ratio", 32.0))
    )
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
