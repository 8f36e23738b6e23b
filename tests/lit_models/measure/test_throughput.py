"""The throughput callback (lit_models/measure/throughput.py): its totals against a count of what
the batches held, and no host-device synchronisation inside a training step."""

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader

from lit_models.measure.throughput import Throughput


class Counting(L.LightningModule):
    """A linear model whose FLOPs per batch are a device tensor, as MaskedLM counts them."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        return self.linear(batch["x"]).mean()

    def flops_per_batch(self, batch) -> torch.Tensor:
        return batch["attention_mask"].sum().float() * 10

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def batches(n: int) -> list[dict]:
    generator = torch.Generator().manual_seed(0)
    out = []
    for _ in range(n):
        lengths = torch.randint(1, 9, (3,), generator=generator)
        mask = (torch.arange(8)[None] < lengths[:, None]).long()
        out.append({"x": torch.randn(3, 4, generator=generator), "attention_mask": mask,
                    "input_ids": torch.zeros(3, 8, dtype=torch.long)})
    return out


def test_totals_equal_what_the_batches_held_and_reads_are_batched(monkeypatch):
    data = batches(7)
    throughput = Throughput(read_every=3)
    reads = []
    original = Throughput._read

    def counted(self):
        reads.append(self.tokens)
        original(self)

    monkeypatch.setattr(Throughput, "_read", counted)
    trainer = L.Trainer(max_steps=7, accelerator="cpu", logger=False, callbacks=[throughput],
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(Counting(), DataLoader(data, batch_size=None))
    tokens = sum(int(b["attention_mask"].sum()) for b in data)
    summary = throughput.summary()
    assert summary["train_tokens"] == tokens and summary["train_samples"] == 21
    assert summary["train_flops"] == 10 * tokens
    assert summary["train_tokens_per_s"] == tokens / summary["train_step_seconds"]
    slots = sum(b["input_ids"].numel() for b in data)
    assert summary["train_padding_fraction"] == pytest.approx(1 - tokens / slots)
    assert 0 < summary["train_padding_fraction"] < 1
    assert len(reads) == 3  # steps 3 and 6, then the end of training: not once per step
