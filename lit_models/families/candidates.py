"""Candidate scoring over any registered encoder: SuperGLUE's MultiRC and ReCoRD as its BERT
baseline trains them (Wang et al. 2019, §5). Each candidate answer is a binary example, read with
its context (``datamodules/candidates.py``) and scored by the architecture's classification head
with two labels, trained with cross-entropy; evaluation reads a question's candidates together:

- MultiRC: an option is predicted right when p(right) > 1/2; F1 over all options (F1_a) and the
  share of questions with every option right (``lit_models/metrics/superglue.py``);
- ReCoRD: the query's answer is its most probable entity, scored by the official ReCoRD
  evaluation (exact match and token F1, the best over the gold answers).

Every evaluation writes ``<run dir>/predictions/<split>.jsonl`` in the inputs of Hugging Face's
``super_glue`` metric: MultiRC ``{"idx": {paragraph, question, answer}, "prediction": 0|1}`` per
option, ReCoRD ``{"idx": {passage, query}, "prediction_text": entity}`` per query. transformers
has no such model, so ``save_model=true`` is refused.
"""

from collections.abc import Mapping, Sequence

import datasets
from torch import nn

from datamodules.candidates import CandidateDataModule
from datamodules.predictions import write_jsonl
from lit_models.archs import arch_of_net
from lit_models.core.family import NotExported
from lit_models.families.classify import Classification, LitClassifier
from lit_models.metrics.classification import class_probabilities
from lit_models.metrics.superglue import multirc_scores, record_scores


def score_multirc(candidates: datasets.Dataset, probabilities: Sequence[float]
                  ) -> tuple[dict[str, float], list[dict]]:
    predictions = [int(p > 0.5) for p in probabilities]
    metrics = multirc_scores(predictions, candidates["label"], candidates["group"])
    rows = [{"idx": idx, "prediction": p} for idx, p in zip(candidates["idx"], predictions,
                                                              strict=True)]
    return metrics, rows


def score_record(candidates: datasets.Dataset, probabilities: Sequence[float]
                 ) -> tuple[dict[str, float], list[dict]]:
    best: dict[str, tuple[float, str, list[str], dict]] = {}  # group -> its most probable entity
    for p, group, text, answers, idx in zip(probabilities, candidates["group"],
                                            candidates["text"], candidates["answers"],
                                            candidates["idx"], strict=True):
        if group not in best or p > best[group][0]:
            best[group] = (p, text, answers, idx)
    chosen = list(best.values())
    metrics = record_scores([text for _, text, _, _ in chosen],
                            [answers for _, _, answers, _ in chosen])
    rows = [{"idx": idx, "prediction_text": text} for _, text, _, idx in chosen]
    return metrics, rows


SCORERS = {"multirc": score_multirc, "record": score_record}


class LitCandidates(LitClassifier):
    """The two-label classifier over candidates, evaluated by question (``SCORERS``)."""

    def __init__(self, encoder, head, task_format: str, eval_splits: Sequence[str],
                 optim: Mapping) -> None:
        super().__init__(encoder, head, 2, (), eval_splits, optim)
        self.score = SCORERS[task_format]
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
            metrics, rows = self.score(self.trainer.datamodule.eval_candidates[i], probabilities)
            self.record_metrics(split, metrics)
            if self.run_dir is not None and self.trainer.is_global_zero:
                path = write_jsonl(self.run_dir, split, rows)
                self.predictions[split] = str(path.relative_to(self.run_dir))


class CandidateScoring(NotExported, Classification):
    """MultiRC (answer options, several may be right), ReCoRD (the passage's entities)."""

    kinds = ("encoder",)
    datamodule = CandidateDataModule
    model_name = "candidate-scoring model"

    def head(self, cfg, net) -> nn.Module:
        """The architecture's classification head with two labels (wrong, right)."""
        return arch_of_net(net).classification_head(net.config, 2,
                                                    cfg["task"]["classifier_dropout"])

    def module(self, cfg, net, head, dm) -> LitCandidates:
        return LitCandidates(net, head, cfg["task"]["format"], dm.eval_split_names,
                             cfg["optim"])


    def baseline(self, task) -> None:
        """None: a majority label per candidate is no answer to a question."""
        return None
