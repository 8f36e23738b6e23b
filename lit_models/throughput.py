"""Training throughput: tokens/s and samples/s over the training steps (validation and data
loading excluded), and model FLOP utilisation where the device's peak is known."""

import time

import lightning as L
import torch
from lightning.fabric.utilities.throughput import get_available_flops


class Throughput(L.Callback):
    """Times every training batch; logs running rates and keeps run totals for the record.

    A batch's tokens are its non-pad tokens (``attention_mask.sum()``). If the LightningModule has
    ``flops_per_batch(batch)``, achieved FLOP/s and MFU (= achieved / device peak) are reported too.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.tokens = 0
        self.samples = 0
        self.flops = 0.0
        self.peak_flops: float | None = None
        self._start = 0.0

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        dtype = torch.bfloat16 if "bf16" in str(trainer.precision) else torch.float32
        self.peak_flops = get_available_flops(trainer.strategy.root_device, dtype)

    def _sync(self, pl_module: L.LightningModule) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._sync(pl_module)
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._sync(pl_module)
        self.seconds += time.perf_counter() - self._start
        self.tokens += int(batch["attention_mask"].sum())
        self.samples += batch["input_ids"].shape[0]
        flops = pl_module.flops_per_batch(batch) if hasattr(pl_module, "flops_per_batch") else None
        if flops is not None:
            self.flops += flops
        pl_module.log_dict(
            {"train/tokens_per_s": self.tokens / self.seconds},
            prog_bar=True,
            on_step=True,
            on_epoch=False,
        )

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Under DDP: the job's totals, tokens summed over ranks, time the slowest rank's."""
        if trainer.world_size == 1:
            return
        counts = torch.tensor([self.tokens, self.samples, self.flops], dtype=torch.float64)
        counts = trainer.strategy.reduce(counts.to(pl_module.device), reduce_op="sum")
        seconds = torch.tensor(self.seconds, dtype=torch.float64, device=pl_module.device)
        self.seconds = float(trainer.strategy.reduce(seconds, reduce_op="max"))
        self.tokens, self.samples, self.flops = (int(counts[0]), int(counts[1]), float(counts[2]))

    def state_dict(self) -> dict[str, float]:
        """The counters, in checkpoints: a resumed run reports the whole run's totals."""
        return {"tokens": self.tokens, "samples": self.samples, "flops": self.flops,
                "seconds": self.seconds}

    def load_state_dict(self, state_dict: dict[str, float]) -> None:
        self.tokens, self.samples = state_dict["tokens"], state_dict["samples"]
        self.flops, self.seconds = state_dict["flops"], state_dict["seconds"]

    def summary(self) -> dict[str, float]:
        """Run totals for the record (empty before any training step)."""
        if self.seconds == 0:
            return {}
        out = {
            "train_tokens": self.tokens,
            "train_samples": self.samples,
            "train_tokens_per_s": self.tokens / self.seconds,
            "train_samples_per_s": self.samples / self.seconds,
            "train_step_seconds": self.seconds,
        }
        if self.flops:
            out["train_flops"] = self.flops
            out["train_flops_per_s"] = self.flops / self.seconds
            if self.peak_flops:
                out["mfu"] = out["train_flops_per_s"] / self.peak_flops
        return out
