"""Pretraining: a net with its pretraining heads trained on a document corpus by an objective.

The objective (``lit_models/objectives``, chosen by ``conf/objective``) corrupts batches in the
collate and computes the losses; ``LitPretrain`` minimises their sum (BERT: L = L_MLM + L_NSP,
Devlin et al. 2019, §3.1) and records the objective's eval metrics per split (MLM loss per
predicted token and its perplexity). ``Pretraining`` is the task family: the objective's example
builder and collator handed to the corpus DataModule, this module, and the export of the
pretrained net for fine-tuning.
"""

import logging
from collections.abc import Mapping

import hydra
import torch
from torchmetrics import MeanMetric

from datamodules import pretrain
from datamodules.errors import PlmbenchError
from datamodules.init_from import EXPORT_DIR, InitFrom
from datamodules.packing import PackingConfig
from datamodules.tokenization import TextTokenizer
from lit_models.archs import Model
from lit_models.archs.spec import TRANSFORMER_KINDS
from lit_models.core.family import TaskFamily, check_max_length
from lit_models.core.module import PlmModule
from lit_models.interop.hf import export_problem, to_hf
from lit_models.metrics import exact_total
from lit_models.objectives.base import PretrainingObjective
from lit_models.objectives.flops import EncoderShape

log = logging.getLogger("plmbench")


class LitPretrain(PlmModule):
    def __init__(self, net, objective: PretrainingObjective, optim: Mapping,
                 eval_splits: list[str]) -> None:
        super().__init__(optim, net.config.num_hidden_layers)
        self.net = net
        self.objective = objective
        self.eval_splits = list(eval_splits)
        self.eval_means = torch.nn.ModuleList(
            torch.nn.ModuleDict({name: exact_total(MeanMetric())
                                 for name in objective.eval_metrics})
            for _ in eval_splits
        )
        self.shape = EncoderShape.of(net.config)

    def training_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        losses = self.objective.losses(self.net, batch)
        self.log_dict({f"train/{k}": v for k, v in losses.items()}, prog_bar=True)
        return sum(losses.values())

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        means = self.eval_means[dataloader_idx]
        for name, (value, weight) in self.objective.evaluate(self.net, batch).items():
            means[name].update(value, weight=weight)

    def on_validation_epoch_end(self) -> None:
        for split, means in zip(self.eval_splits, self.eval_means, strict=True):
            if not self.trainer.sanity_checking:
                values = {name: float(metric.compute()) for name, metric in means.items()}
                self.record_metrics(split, self.objective.summarize(values))
            for metric in means.values():
                metric.reset()

    def flops_per_batch(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor | float | None:
        return self.objective.flops(self.shape, batch)


def pretraining_datamodule(task: Mapping, tokenizer: TextTokenizer,
                           objective: PretrainingObjective, seed: int = 0
                           ) -> pretrain.PretrainDataModule:
    """The corpus DataModule fed with ``objective``'s examples and collate; packed rows where
    ``task.packing`` asks for them and the objective's examples can be packed."""
    packing = PackingConfig.of(task)
    pack = packing.enabled and objective.packable
    if packing.enabled and not pack:
        log.info("%s: examples not packed (task.packing applies to objectives with "
                 "packable examples)", type(objective).__name__)
    def builder(length: int):
        return (objective.make_examples(length, tokenizer, packing) if pack
                else objective.make_examples(length, tokenizer))

    phases = [(share, length, builder(length)) for share, length in length_schedule(task)]
    return pretrain.PretrainDataModule(
        task, tokenizer, builder(task["max_length"]), objective.collator(tokenizer, seed),
        copies=objective.copies, seeded=objective.seeded, pack=pack, seed=seed,
        text=objective.reads_text, phases=phases or None,
    )


def length_schedule(task: Mapping) -> list[tuple[float, int]]:
    """``task.length_schedule`` checked: (share of the steps, tokens) pairs whose shares sum to
    1 (BERT, Devlin et al. 2019, A.2: [[0.9, 128], [0.1, 512]]); [] without one."""
    schedule = task.get("length_schedule") or []
    pairs = [tuple(phase) for phase in schedule]
    valid = all(len(p) == 2 and 0 < p[0] <= 1 and int(p[1]) == p[1] > 0 for p in pairs)
    if not valid or (pairs and abs(sum(p[0] for p in pairs) - 1) > 1e-6):
        raise PlmbenchError(f"task {task['name']}: length_schedule {schedule} must be [share, "
                            "tokens] pairs whose shares sum to 1, e.g. [[0.9, 128], [0.1, 512]]")
    return [(float(share), int(length)) for share, length in pairs]


def build_objective(config: Mapping, model: Model) -> PretrainingObjective:
    """The objective a ``conf/objective`` YAML names, checked against the model's architecture
    and tokenizer."""
    try:
        objective = hydra.utils.instantiate(config)
    except Exception as err:
        cause = err.__cause__ or err
        if isinstance(cause, PlmbenchError):
            raise cause from None
        raise PlmbenchError(
            f"objective {config.get('name')}: cannot be built ({cause}); check "
            "its YAML's _target_ and fields"
        ) from None
    objective.check(model)
    return objective


class Pretraining(TaskFamily):
    """A pretraining objective on a document corpus; the pretrained net is exported."""

    with_heads = True
    pretrains = True
    kinds = TRANSFORMER_KINDS

    def vocabulary_corpus(self, task):
        return pretrain.vocabulary_corpus(task)

    def build(self, cfg, model: Model, init_from: InitFrom):
        task = cfg["task"]
        longest = max([task["max_length"], *(length for _, length in length_schedule(task))])
        check_max_length({**task, "max_length": longest}, model.net)
        objective = build_objective(cfg["objective"], model)
        dm = pretraining_datamodule(task, model.tokenizer, objective, cfg["seed"])
        return LitPretrain(model.net, objective, cfg["optim"], dm.eval_split_names), dm

    def export(self, module, model: Model, run_dir, cfg) -> None:
        reason = export_problem(model.arch, model.net)
        if reason:  # the run's metrics stand; only the export has no layout to go to
            log.warning("%s: pretrained net not exported: %s", run_dir, reason)
            return
        to_hf(model, run_dir / EXPORT_DIR)
