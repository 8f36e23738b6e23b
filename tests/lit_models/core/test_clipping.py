"""Gradient clipping under every precision the presets use, with the fused AdamW kernel: one
Lightning training step of a module whose gradients are known (loss = <w, G_w> + <b, G_b>, so
dloss/dw = G_w exactly, with no matmul for autocast to round) against the update written out by
hand: BERT's global-norm clip (g * c / max(||g||, c), Devlin et al.'s ``clip_by_global_norm``)
then AdamW's first step, p <- p (1 - lr wd) - lr g / (|g| + eps) (bias-corrected moments are g
and g^2). eps is large so that the update depends on the gradient's scale, which makes the clip
visible. fp16 runs through its GradScaler (scale 2^16), which must be undone before clipping; an
overflowing fp16 step is skipped."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from lightning.pytorch.plugins.precision import MixedPrecision
from torch import nn
from torch.utils.data import DataLoader

import lit_models.core.optim
from lit_models.core.module import PlmModule
from lit_models.core.optim import clip_by_global_norm

LR, WEIGHT_DECAY, EPS, CLIP = 0.1, 0.01, 0.5, 1.0
OPTIM = dict(lr=LR, weight_decay=WEIGHT_DECAY, betas=[0.9, 0.999], eps=EPS, warmup_ratio=0.0,
             schedule="constant", layerwise_lr_decay=1.0)
W0, B0 = torch.linspace(-1.0, 1.0, 12).view(3, 4), torch.linspace(0.5, 2.0, 4)


class KnownGradients(PlmModule):
    """w (a matrix: weight decay) and b (a vector: none), whose gradients are the batch's."""

    def __init__(self) -> None:
        super().__init__(OPTIM, num_layers=0)
        self.w = nn.Parameter(W0.clone())
        self.b = nn.Parameter(B0.clone())

    def training_step(self, batch, batch_idx):
        return (self.w * batch["g_w"]).sum() + (self.b * batch["g_b"]).sum()


def gradients(norm: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of mixed signs whose global L2 norm is ``norm``."""
    g_w = torch.arange(1.0, 13.0).view(3, 4) * torch.tensor([1.0, -1.0, 1.0, -1.0])
    g_b = torch.tensor([-2.0, 0.5, 3.0, -1.0])
    total = torch.cat([g_w.flatten(), g_b]).norm()
    return g_w * norm / total, g_b * norm / total


def adamw_first_step(p0: torch.Tensor, g: torch.Tensor, weight_decay: float) -> torch.Tensor:
    return p0 * (1 - LR * weight_decay) - LR * g / (g.abs() + EPS)


def train_one_step(precision: str, g_w: torch.Tensor, g_b: torch.Tensor):
    module = KnownGradients()
    # Lightning maps "16-mixed" to bf16 on CPU; the fp16 plugin with its GradScaler is asked for
    # by hand, so that the scaler's path runs here too
    amp = {"plugins": [MixedPrecision("16-mixed", "cpu")]} if precision == "16-mixed" else {
        "precision": precision}
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=1, gradient_clip_val=CLIP,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, **amp)
    trainer.fit(module, DataLoader([{"g_w": g_w, "g_b": g_b}], batch_size=None))
    return module, trainer


PRECISIONS = ["32-true", "bf16-mixed", "16-mixed"]


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "foreach"])
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("norm", [5.0, 0.5], ids=["clipped", "under-the-clip"])
def test_one_step_clips_by_the_global_norm_then_takes_adamws_step(precision, fused, norm,
                                                                 monkeypatch):
    monkeypatch.setattr(lit_models.core.optim, "fusable", lambda groups: fused)
    g_w, g_b = gradients(norm)
    module, trainer = train_one_step(precision, g_w, g_b)
    optimizer = trainer.optimizers[0]
    assert bool(optimizer.defaults["fused"]) is fused
    factor = CLIP / max(norm, CLIP)  # BERT: t * clip_norm / max(global_norm, clip_norm)
    expected_w = adamw_first_step(W0, g_w * factor, WEIGHT_DECAY)
    expected_b = adamw_first_step(B0, g_b * factor, 0.0)  # vectors take no weight decay
    torch.testing.assert_close(module.w.detach(), expected_w, rtol=0, atol=1e-6)
    torch.testing.assert_close(module.b.detach(), expected_b, rtol=0, atol=1e-6)
    if norm > CLIP:  # the unclipped update is far from it: the clip is what the test sees
        unclipped = adamw_first_step(W0, g_w, WEIGHT_DECAY)
        assert (unclipped - expected_w).abs().max() > 0.01


def test_an_overflowing_fp16_step_is_skipped_and_the_scale_backs_off():
    g_w, g_b = gradients(5.0)
    g_w[0, 0] = float("inf")
    module, trainer = train_one_step("16-mixed", g_w, g_b)
    assert torch.equal(module.w.detach(), W0) and torch.equal(module.b.detach(), B0)
    scaler = trainer.precision_plugin.scaler
    assert scaler.get_scale() == 2.0**16 * scaler.get_backoff_factor()


def test_clip_by_global_norm_returns_the_norm_and_skips_missing_gradients():
    a, b, frozen = (nn.Parameter(torch.zeros(n)) for n in (3, 2, 4))
    a.grad, b.grad = torch.tensor([3.0, 0.0, 0.0]), torch.tensor([0.0, 4.0])
    total = clip_by_global_norm([a, b, frozen], 2.0)
    assert total.item() == pytest.approx(5.0)
    torch.testing.assert_close(a.grad, torch.tensor([1.2, 0.0, 0.0]))
    torch.testing.assert_close(b.grad, torch.tensor([0.0, 1.6]))
    assert frozen.grad is None
