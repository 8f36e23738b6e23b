"""``trainer.compile=true`` on a GPU: inductor-compiled encoders take the same training steps as
eager ones (float32 with full-precision matmuls; bf16 autocast within bf16's precision)."""

import copy

import pytest
import torch

from lit_models.families.pretrain import LitPretrain
from lit_models.nets.bert import BertConfig, BertForPreTraining
from lit_models.objectives.mlm import MaskedLM
from tests.lit_models.core.test_compile import OPTIM, SIZES, batch

CUDA = torch.device("cuda")


def train(module: LitPretrain, steps: int, precision: torch.dtype) -> list[float]:
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-2, weight_decay=0.0, fused=True)
    losses = []
    for step in range(steps):
        inputs = {k: v.to(CUDA) for k, v in batch(step).items()}
        with torch.autocast("cuda", dtype=precision, enabled=precision != torch.float32):
            loss = sum(module.objective.losses(module.net, inputs).values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize(("precision", "tolerance"), [(torch.float32, 1e-4),
                                                      (torch.bfloat16, 5e-2)])
def test_inductor_steps_equal_eager_steps(precision, tolerance):
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        torch.manual_seed(0)
        eager = LitPretrain(BertForPreTraining(BertConfig(**SIZES)), MaskedLM(), OPTIM, []).to(CUDA)
        compiled = copy.deepcopy(eager)
        assert compiled.compile_encoders() == ["net.bert"]  # inductor
        expected, got = train(eager, 3, precision), train(compiled, 3, precision)
    finally:
        torch.set_float32_matmul_precision(previous)
    assert expected[0] > expected[-1]
    assert got == pytest.approx(expected, abs=tolerance)
