"""What every plmbench LightningModule shares: the optimizer setup, per-split evaluation metrics
collected from the last validation pass, the step at which that pass ran, the prediction
files an evaluation wrote into the run directory (Design contract 10), the callbacks of its
fine-tuning method, ``torch.compile`` of
its encoders (``trainer.compile``), and gradient clipping that works with mixed precision and the
fused AdamW kernel together (``trainer.gradient_clip_val``, BERT's global norm 1.0)."""

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import lightning as L
import torch.distributed
from lightning.pytorch.plugins.precision import (
    DoublePrecision,
    HalfPrecision,
    MixedPrecision,
    Precision,
)
from lightning.pytorch.utilities import GradClipAlgorithmType

from lit_models.archs import ARCHS
from lit_models.core.optim import clip_by_global_norm, configure_optimizer
from lit_models.core.outcome import FamilyResult

#: precision plugins whose gradients are the module's own ``.grad`` tensors, clipped here; any
#: other (FSDP's sharded gradients, DeepSpeed's) clips the Lightning way
PLAIN_GRADIENTS = (Precision, MixedPrecision, HalfPrecision, DoublePrecision)


class PlmModule(L.LightningModule):
    """Base class: subclasses fill ``self.last_metrics[split][name]`` at each validation end."""

    def __init__(self, optim: Mapping, num_layers: int) -> None:
        super().__init__()
        self.optim_cfg = dict(optim)
        self.num_layers = num_layers
        self.last_metrics: dict[str, dict[str, float]] = {}
        #: split -> metric -> how the scorer computed it (sacreBLEU's signature), for the record
        self.metric_signatures: dict[str, dict[str, str]] = {}
        self.validated_at_step = -1
        #: the run directory (``write_predictions_to``); a module that writes predictions puts
        #: them under ``<run_dir>/predictions/`` and lists them in ``predictions`` (split ->
        #: relative path); None: an evaluation writes no files (a test's module)
        self.run_dir: Path | None = None
        self.predictions: dict[str, str] = {}
        #: what the run must say in its log and its record about how it was set up (a
        #: checkpoint's head that does not fit the task, so the task's starts untrained)
        self.notes: list[str] = []
        #: what the last evaluation found besides metrics, kept in the record as it is (JSON):
        #: a word-vector run's nearest neighbours of its query words, ...
        self.outputs: dict = {}
        #: what the run's fine-tuning method adds to the Trainer (``lit_models/core/finetune``:
        #: gradual unfreezing, a frozen encoder kept in eval mode)
        self.finetune_callbacks: list[L.Callback] = []
        #: a teacher's soft targets mixed into the training loss (task-level distillation,
        #: ``lit_models/families/distillation.py``): (loss, scores, batch) -> loss; None: the
        #: task's loss alone
        self.soft_targets = None

    def write_predictions_to(self, run_dir: Path) -> None:
        """Where this module's evaluations write their prediction files: ``run_dir``'s
        ``predictions/`` (the run calls it once, before training)."""
        self.run_dir = Path(run_dir)

    def result(self) -> FamilyResult:
        """What the run's record keeps of this module's work (``FamilyResult``), as one value:
        the last evaluation's metrics and signatures, the files it wrote, its outputs, the
        notes on how the run was set up."""
        return FamilyResult(metrics=self.last_metrics, metric_signatures=self.metric_signatures,
                            predictions=self.predictions, outputs=self.outputs,
                            notes=tuple(self.notes))

    def configure_callbacks(self) -> list[L.Callback]:
        return list(self.finetune_callbacks)

    def distilled(self, loss, scores, batch):
        """The training ``loss`` with the teacher's soft targets for ``scores``, if any."""
        return loss if self.soft_targets is None else self.soft_targets(loss, scores, batch)

    def compile_encoders(self, backend: str = "inductor") -> list[str]:
        """``torch.compile`` (``backend``) every registered architecture's encoder inside this
        module, where a step's FLOPs are (ELECTRA's generator and discriminator both); heads
        and losses run eagerly. Compiled in place (``nn.Module.compile``): parameter names,
        checkpoints and exports are unchanged. Returns the compiled modules' names."""
        encoders = tuple({arch.encoder for arch in ARCHS.values()})
        compiled: list[str] = []
        for name, module in self.named_modules():
            inside = any(name.startswith(f"{outer}.") for outer in compiled)
            if isinstance(module, encoders) and not inside:
                module.compile(backend=backend)
                compiled.append(name)
        return compiled

    def configure_optimizers(self) -> dict:
        total_steps = int(self.trainer.estimated_stepping_batches)
        return configure_optimizer(self, self.optim_cfg, total_steps, self.num_layers)

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer,
                                    gradient_clip_val: float | None = None,
                                    gradient_clip_algorithm: str | None = None) -> None:
        """Clip the true (unscaled) gradients before the optimizer steps: by their global norm as
        BERT does (``clip_by_global_norm``), or by value.

        Lightning refuses to clip under mixed precision when the optimizer unscales inside its
        own step, as the fused AdamW kernel does (``_step_supports_amp_scaling``). With bf16 there
        is no scale at all. With fp16 the GradScaler is asked to unscale here, once, which also
        records whether a gradient overflowed; the scaler then hands the fused kernel no scale,
        only that flag, and the kernel skips the update of an overflowed step."""
        plugin = self.trainer.precision_plugin
        if not gradient_clip_val or type(plugin) not in PLAIN_GRADIENTS:
            super().configure_gradient_clipping(optimizer, gradient_clip_val,
                                                gradient_clip_algorithm)
            return
        scaler = getattr(plugin, "scaler", None)
        if scaler is not None and getattr(optimizer, "_step_supports_amp_scaling", False):
            scaler.unscale_(optimizer)  # Lightning unscales every other optimizer itself
        parameters = list(plugin.main_params(optimizer))
        if gradient_clip_algorithm == GradClipAlgorithmType.VALUE:
            torch.nn.utils.clip_grad_value_(parameters, gradient_clip_val)
        else:
            clip_by_global_norm(parameters, gradient_clip_val)

    def record_metrics(self, split: str, values: Mapping[str, float],
                       signatures: Mapping[str, str] | None = None) -> None:
        """Log ``<split>/<name>`` and keep the values for the run record, with the
        ``signatures`` of the metrics whose computation a scorer names (tokenizer, version)."""
        values = {name: float(v) for name, v in values.items()}
        self.last_metrics[split] = values
        if signatures:
            self.metric_signatures[split] = dict(signatures)
        # torchmetrics already reduced the values over ranks: the sync is a no-op all-reduce
        self.log_dict({f"{split}/{k}": v for k, v in values.items()}, prog_bar=True,
                      add_dataloader_idx=False, sync_dist=True)
        self.validated_at_step = self.global_step

    def gather_indexed(self, items: Iterable[tuple[int, object]]) -> list[tuple[int, object]]:
        """Every process's (example index, output) pairs, on every process, one per index, in
        index order. Under DDP the evaluation's sampler gives each process a share of the
        examples and pads the shares with repeats, so outputs computed per process (generated
        text, span logits) are gathered here before they are scored or written."""
        items = list(items)
        if self.trainer.world_size > 1:
            shares: list = [None] * self.trainer.world_size
            torch.distributed.all_gather_object(shares, items)
            items = [item for share in shares for item in share]
        return sorted(dict(items).items(), key=lambda item: item[0])

    def gather_batches(self, batches: Sequence) -> list:
        """Every process's outputs of its evaluation batches (one item per batch, in its loader's
        order), on every process, in the order one process computes them: the evaluation sampler
        deals batch k to rank k mod N (``datamodules/eval_sampling.py``), so the ranks' batches
        taken in turn are the examples in order, and sums over them run in one order."""
        batches = list(batches)
        world = self.trainer.world_size if self._trainer is not None else 1
        if world == 1:
            return batches
        shares: list = [None] * world
        torch.distributed.all_gather_object(shares, batches)
        return [shares[k % world][k // world] for k in range(sum(map(len, shares)))]

    def gathered_splits(self, collected: list[list[tuple[int, object]]]
                        ) -> Iterator[tuple[int, str, list]]:
        """(i, split, its outputs in example order) of each eval split, from the per-split
        (example index, output) pairs an evaluation collected; nothing during Lightning's sanity
        check, whose outputs are no evaluation."""
        if self.trainer.sanity_checking:
            return
        for i, split in enumerate(self.eval_splits):
            yield i, split, [out for _, out in self.gather_indexed(collected[i])]
