"""Candidate scoring over any registered encoder: SuperGLUE's MultiRC and ReCoRD as its BERT
baseline trains them (Wang et al. 2019, §5). Each candidate answer is a binary example, read with
its context (``datamodules/candidates.py``) and scored by the architecture's classification head
with two labels, trained with cross-entropy; evaluation reads a question's candidates together:

- MultiRC: an option is predicted right when p(right) > 1/2; the task's metrics score the options
  (F1 over all options, F1_a, and the share of questions with every option right:
  ``lit_models/metrics/superglue.py``);
- ReCoRD: the query's answer is its most probable entity, scored by the task's metrics (the
  official ReCoRD evaluation: exact match and token F1, the best over the gold answers).

Every evaluation writes ``<run dir>/predictions/<split>.jsonl`` in the inputs of Hugging Face's
``super_glue`` metric: MultiRC ``{"idx": {paragraph, question, answer}, "prediction": 0|1}`` per
option, ReCoRD ``{"idx": {passage, query}, "prediction_text": entity}`` per query. transformers
has no such model, so ``save_model=true`` is refused.
"""

from collections.abc import Mapping, Sequence

import datasets
from torch import nn

from datamodules.candidates import CandidateDataModule
from datamodules.init_from import InitFrom
from datamodules.predictions import write_jsonl
from lit_models.archs import Capabilities, Model
from lit_models.core.family import NotExported
from lit_models.families.classify import Classification, LitClassifier
from lit_models.metrics import Metrics, build_metrics
from lit_models.metrics.classification import class_probabilities


def score_multirc(metrics: Metrics, candidates: datasets.Dataset,
                  probabilities: Sequence[float]) -> list[dict]:
    """Update ``metrics`` with the options' labels (right where p(right) > 1/2); the rows."""
    predictions = [int(p > 0.5) for p in probabilities]
    metrics.update(list(zip(candidates["label"], candidates["group"], strict=True)),
                   answer_options=predictions)
    return [{"idx": idx, "prediction": p} for idx, p in zip(candidates["idx"], predictions,
                                                             strict=True)]


def score_record(metrics: Metrics, candidates: datasets.Dataset,
                 probabilities: Sequence[float]) -> list[dict]:
    """Update ``metrics`` with each query's most probable entity; the rows."""
    best: dict[str, tuple[float, str, list[str], dict]] = {}  # group -> its most probable entity
    for p, group, text, answers, idx in zip(probabilities, candidates["group"],
                                            candidates["text"], candidates["answers"],
                                            candidates["idx"], strict=True):
        if group not in best or p > best[group][0]:
            best[group] = (p, text, answers, idx)
    chosen = list(best.values())
    metrics.update([answers for _, _, answers, _ in chosen],
                   entities=[text for _, text, _, _ in chosen])
    return [{"idx": idx, "prediction_text": text} for _, text, _, idx in chosen]


#: task format -> (what its metrics score, how a split's candidates are scored)
SCORERS = {"multirc": ("answer_options", score_multirc), "record": ("entities", score_record)}


class LitCandidates(LitClassifier):
    """The two-label classifier over candidates, evaluated by question (``SCORERS``)."""

    def __init__(self, encoder, capabilities: Capabilities, head, task_format: str,
                 eval_splits: Sequence[str], optim: Mapping, metrics: Sequence[str]) -> None:
        super().__init__(encoder, capabilities, head, 2, (), eval_splits, optim)
        kind, self.score = SCORERS[task_format]
        self.scorer = build_metrics(metrics, kind)
        #: per eval split, (candidate index, p(right)) of the last evaluation
        self.collected: list[list[tuple[int, float]]] = [[] for _ in self.eval_splits]

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        scores = self(batch)
        if bool((batch["labels"] >= 0).all()):  # unlabelled test rows (-1) have no loss
            split = self.eval_splits[dataloader_idx]
            self.log(f"{split}/loss", self.loss(scores, batch["labels"]),
                     add_dataloader_idx=False, sync_dist=True)
        right = class_probabilities(scores, 2).cpu().tolist()
        self.collected[dataloader_idx].extend(zip(batch["index"].tolist(), right, strict=True))

    def on_validation_epoch_end(self) -> None:
        collected, self.collected = self.collected, [[] for _ in self.eval_splits]
        for i, split, probabilities in self.gathered_splits(collected):
            rows = self.score(self.scorer, self.trainer.datamodule.eval_candidates[i],
                              probabilities)
            self.record_metrics(split, self.scorer.compute())
            self.scorer.reset()
            if self.run_dir is not None and self.trainer.is_global_zero:
                path = write_jsonl(self.run_dir, split, rows)
                self.predictions[split] = str(path.relative_to(self.run_dir))


class CandidateScoring(NotExported, Classification):
    """MultiRC (answer options, several may be right), ReCoRD (the passage's entities)."""

    kinds = ("encoder",)
    datamodule = CandidateDataModule
    model_name = "candidate-scoring model"

    def head(self, cfg, model: Model, init_from: InitFrom) -> nn.Module:
        """The architecture's classification head with two labels (wrong, right)."""
        return model.arch.classification_head(model.net.config, 2,
                                              cfg["task"]["classifier_dropout"])

    def module(self, cfg, model: Model, head, dm) -> LitCandidates:
        return LitCandidates(model.net, model.arch.capabilities, head, cfg["task"]["format"],
                             dm.eval_split_names, cfg["optim"], cfg["task"]["metrics"])

    def evaluation_outputs(self, module, run_dir, cfg) -> dict[str, str]:
        """Nothing more: each evaluation writes its jsonl files (``module.predictions``)."""
        return {}

    def baseline(self, task) -> None:
        """None: a majority label per candidate is no answer to a question."""
        return None
