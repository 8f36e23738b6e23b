"""Training throughput: tokens/s and samples/s over the training steps (validation and data
loading excluded), and model FLOP utilisation where the device's peak is known
(``lit_models/measure/peak_flops.py``: A100, H100, H200).

No host-device synchronisation inside a training step: a batch's non-pad token count (and its
model FLOPs, when the module counts them from device tensors) is added to a counter on the device,
and on CUDA each step is timed by a pair of CUDA events recorded on the stream. They are read, in
one synchronisation, every ``read_every`` steps and at the end of training (on CPU, steps are
timed with the host clock, which is exact there).
"""

import time

import lightning as L
import torch

from lit_models.measure.peak_flops import device_peak_flops


def matmul_dtype(precision: str) -> torch.dtype:
    """The dtype a Lightning precision runs its matmuls in (whose peak MFU divides by):
    bf16-mixed/true -> bf16, 16-mixed/true -> fp16 (the same tensor-core peak), else fp32."""
    if precision.startswith("bf16"):
        return torch.bfloat16
    return torch.float16 if precision.startswith("16") else torch.float32


class Throughput(L.Callback):
    """Times every training batch; logs running rates and the share of padding in the batches
    (``train/padding``) every ``read_every`` steps and keeps run totals for the record.

    A batch's tokens are its non-pad tokens (``attention_mask.sum()``; every token of a batch
    without padding, which has no mask). If the LightningModule has
    ``flops_per_batch(batch)``, achieved FLOP/s and MFU (= achieved / device peak) are reported too.
    """

    def __init__(self, read_every: int = 50) -> None:
        self.read_every = read_every
        self.seconds = 0.0
        self.tokens = 0
        self.samples = 0
        self.slots = 0  # batch x length of every batch: tokens + padding
        self.flops = 0.0
        self.peak_flops: float | None = None
        self._pending: dict[str, torch.Tensor | float] = {}  # device-side token / FLOP sums
        self._events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._start: float | torch.cuda.Event = 0.0

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.peak_flops = device_peak_flops(trainer.strategy.root_device,
                                            matmul_dtype(str(trainer.precision)))

    @staticmethod
    def _cuda(pl_module: L.LightningModule) -> bool:
        return pl_module.device.type == "cuda"

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._cuda(pl_module):
            self._start = torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._cuda(pl_module):
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self._events.append((self._start, end))
        else:
            self.seconds += time.perf_counter() - self._start
        mask = batch.get("attention_mask")  # absent: a batch without padding (the collate's)
        self._add("tokens", batch["input_ids"].numel() if mask is None else mask.sum())
        self.samples += len(batch["input_ids"])  # shapes: known on the host
        self.slots += batch["input_ids"].numel()
        flops = pl_module.flops_per_batch(batch) if hasattr(pl_module, "flops_per_batch") else None
        if flops is not None:
            self._add("flops", flops)
        if trainer.global_step % self.read_every == 0:
            self._read()
            if self.seconds:
                pl_module.log("train/tokens_per_s", self.tokens / self.seconds, prog_bar=True,
                              on_step=True, on_epoch=False)
                pl_module.log("train/padding", self.padding, on_step=True, on_epoch=False)

    @property
    def padding(self) -> float:
        """Share of the batches' [B x T] slots that held padding, over the steps read so far."""
        return 1 - self.tokens / self.slots if self.slots else 0.0

    def _add(self, name: str, value: torch.Tensor | float) -> None:
        self._pending[name] = self._pending.get(name, 0) + value

    def _read(self) -> None:
        """Fold the device-side counters into the host totals (one synchronisation)."""
        if self._events:
            self._events[-1][1].synchronize()
            self.seconds += sum(start.elapsed_time(end) for start, end in self._events) / 1e3
            self._events.clear()
        self.tokens += int(self._pending.pop("tokens", 0))
        self.flops += float(self._pending.pop("flops", 0.0))

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Read what is left; under DDP, the job's totals: tokens summed over ranks, time the
        slowest rank's."""
        self._read()
        if trainer.world_size == 1:
            return
        counts = torch.tensor([self.tokens, self.samples, self.flops, self.slots],
                              dtype=torch.float64)
        counts = trainer.strategy.reduce(counts.to(pl_module.device), reduce_op="sum")
        seconds = torch.tensor(self.seconds, dtype=torch.float64, device=pl_module.device)
        self.seconds = float(trainer.strategy.reduce(seconds, reduce_op="max"))
        self.tokens, self.samples = int(counts[0]), int(counts[1])
        self.flops, self.slots = float(counts[2]), int(counts[3])

    def state_dict(self) -> dict[str, float]:
        """The counters, in checkpoints: a resumed run reports the whole run's totals."""
        return {"tokens": self.tokens, "samples": self.samples, "flops": self.flops,
                "seconds": self.seconds, "slots": self.slots}

    def load_state_dict(self, state_dict: dict[str, float]) -> None:
        self.tokens, self.samples = state_dict["tokens"], state_dict["samples"]
        self.flops, self.seconds = state_dict["flops"], state_dict["seconds"]
        self.slots = state_dict.get("slots", 0)  # checkpoints written before it was counted

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
            "train_padding_fraction": self.padding,
        }
        if self.flops:
            out["train_flops"] = self.flops
            out["train_flops_per_s"] = self.flops / self.seconds
            if self.peak_flops:
                out["mfu"] = out["train_flops_per_s"] / self.peak_flops
        return out
