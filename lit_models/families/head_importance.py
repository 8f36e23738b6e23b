"""Head importance and iterative head pruning (Michel et al. 2019, "Are Sixteen Heads Really
Better than One?").

§3, Eq. 1: each head h of multi-head attention gets a mask variable ξ_h (the net's
``head_mask``): MHAtt(x) = Σ_h ξ_h Att_h(x). §4.1, Eq. 2: the importance of h is
I_h = E_{x~X} |∂L(x)/∂ξ_h| at ξ = 1, the expected sensitivity of the loss to the mask: by a
first-order Taylor expansion, how much the loss moves when h is removed (ξ_h = 0). Each example
gets its own mask ([B, layers, heads]), so one backward pass of the summed loss gives every
example's gradient, whose absolute values are averaged. As in the released code (after Molchanov
et al. 2017), the scores are then normalised within each layer by their ℓ2 norm. §4.2: iterative
pruning removes the heads of lowest importance, a fixed share of all heads at a time (10% in
Figure 3), recomputing the importance of the remaining heads under the current mask after each
step; the task score after each step is the pruning curve.
"""

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import torch
from lightning.fabric.utilities.apply_func import move_data_to_device
from torch import Tensor, nn


@contextlib.contextmanager
def masked_heads(encoder: nn.Module, mask: Tensor | None) -> Iterator[None]:
    """Every call of ``encoder`` inside the block gets ``head_mask=mask`` (whoever calls it: a
    task module's forward, its validation step); nothing with ``mask`` None."""
    if mask is None:
        yield
        return

    def add_mask(module, args, kwargs):
        return args, {**kwargs, "head_mask": mask}

    handle = encoder.register_forward_pre_hook(add_mask, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


def head_importance(encoder: nn.Module, example_losses: Callable[[Mapping], Tensor],
                    batches: Iterable[Mapping], mask: Tensor,
                    device: torch.device | None = None) -> Tensor:
    """I [layers, heads] (§4.1, Eq. 2): the mean over the examples of |∂L(x)/∂ξ_h| at the
    current ``mask`` (1 = kept, 0 = removed), ``example_losses(batch)`` [B] the loss of each
    example of a batch through the model around ``encoder``."""
    total, count = torch.zeros_like(mask, dtype=torch.float64), 0
    for batch in batches:
        batch = move_data_to_device(batch, device) if device is not None else batch
        size = len(next(iter(batch.values())))
        xi = mask.to(device or mask.device).expand(size, *mask.shape).clone().requires_grad_()
        with masked_heads(encoder, xi):
            losses = example_losses(batch)
        (gradient,) = torch.autograd.grad(losses.sum(), xi)
        total += gradient.abs().sum(0).double().cpu()
        count += size
    return (total / max(count, 1)).float()


def normalize_by_layer(importance: Tensor) -> Tensor:
    """Each layer's scores divided by their ℓ2 norm (Michel et al.'s released code)."""
    norm = importance.pow(2).sum(-1, keepdim=True).sqrt()
    return importance / (norm + 1e-20)


@dataclass
class PruningStep:
    """The model after one step: the heads kept, the mask, the task's metrics, and the
    importance (normalised) that chose the heads this step removed (None at the start)."""

    heads_kept: int
    mask: Tensor
    metrics: dict
    importance: Tensor | None
    removed: list[tuple[int, int]]


def pruning_curve(evaluate: Callable[[Tensor], dict], importance: Callable[[Tensor], Tensor],
                  shape: tuple[int, int], step: float, normalize: bool = True
                  ) -> list[PruningStep]:
    """Michel et al.'s iterative pruning (§4.2): from every head kept, remove the
    ``step`` share of all heads (at least one) of lowest importance among those left,
    recomputing ``importance(mask)`` each time, until none is left; ``evaluate(mask)`` gives the
    metrics after each step."""
    if not 0 < step <= 1:
        raise ValueError(f"step={step}: the share of heads removed at each step is in (0, 1]")
    mask = torch.ones(shape)
    per_step = max(1, round(step * mask.numel()))
    steps = [PruningStep(mask.numel(), mask.clone(), evaluate(mask), None, [])]
    while mask.sum() > 0:
        scores = importance(mask)
        if normalize:
            scores = normalize_by_layer(scores)
        ranked = scores.masked_fill(mask == 0, float("inf")).flatten().argsort(stable=True)
        chosen = ranked[: min(per_step, int(mask.sum()))]
        mask.view(-1)[chosen] = 0
        removed = [divmod(int(i), shape[1]) for i in chosen]
        steps.append(PruningStep(int(mask.sum()), mask.clone(), evaluate(mask), scores,
                                 removed))
    return steps


def removed_heads(mask: Tensor) -> dict[int, list[int]]:
    """{layer: heads} whose mask is 0."""
    return {layer: [int(h) for h in (row == 0).nonzero().flatten()]
            for layer, row in enumerate(mask) if (row == 0).any()}
