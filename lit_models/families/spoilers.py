"""Spoiler detection (Wan et al. 2019, "Fine-grained spoiler detection from large-scale review
corpora"): is a review's sentence a spoiler? Sentence (pair) classification of the sentence with
its neighbours (``datamodules/spoilers.py``) by encoders and decoders, with the classifier's head
and cross-entropy; spoilers are rare, so ``task.imbalance.method: weighted`` weights each class by
N / (2 N_c) (scikit-learn's "balanced"; ``undersample`` thins the non-spoilers instead). Records
hold the paper's AUC (ROC of p(spoiler)), the F1 of the spoiler class and accuracy.

The board reads every run against two rows fitted on the task's data alone: the majority class
(never a spoiler: AUC 1/2, F1 0) and a bag-of-words classifier, TF-IDF features (unigrams and
bigrams) and logistic regression with scikit-learn, class-weighted as the task asks, on the same
text the encoder reads. The latter is cached under ``$PLMBENCH_CACHE/baselines/`` by the
fingerprints of the data and its settings, so a leaderboard fits it once.
"""

import hashlib
import json
import logging
from collections.abc import Mapping

import torch
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from datamodules import strict_json
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text
from datamodules.spoilers import SpoilerDataModule
from datamodules.tokenization import cache_root
from lit_models.families.classify import Classification
from lit_models.metrics.classification import label_metrics, label_predictions

TFIDF_ROW = "TF-IDF + logistic regression"
log = logging.getLogger("plmbench")


def inputs(task: Mapping, rows) -> list[str]:
    """The text of each example as one string (sentence, then its context)."""
    return [" ".join(parts) for parts in zip(*(rows[f] for f in task["text_fields"]),
                                             strict=True)]


class SpoilerDetection(Classification):
    """Goodreads spoiler sentences, read in their review."""

    datamodule = SpoilerDataModule

    def class_weights(self, task) -> list[float] | None:
        """N / (2 N_c) per class with ``imbalance.method: weighted`` (1 for a class absent from
        the capped training split)."""
        if task["imbalance"]["method"] != "weighted":
            return None
        labels = torch.tensor(self.datamodule.labels(task, task["splits"]["train"],
                                                     "max_train_samples"))
        counts = labels.bincount(minlength=2).float()
        return [len(labels) / (2 * n) if n else 1.0 for n in counts.tolist()]

    def baselines(self, task):
        rows = super().baselines(task)
        if task["splits"].get("train"):
            try:
                rows[TFIDF_ROW] = self.tfidf_baseline(task)
            except PlmbenchError as err:  # the majority row stays; the board says why not this
                log.warning("no %s row for %s: %s", TFIDF_ROW, task["name"], err)
        return rows

    def tfidf_baseline(self, task: Mapping) -> dict[str, dict[str, float]]:
        """The TF-IDF + logistic-regression row's metrics per eval split (cached)."""
        dm = self.datamodule
        task = dm.checked(task)
        train = dm.rows(task, task["splits"]["train"], task.get("max_train_samples"))
        evals = {split: dm.rows(task, split, task.get("max_eval_samples"))
                 for split in task["splits"]["eval"]}
        settings = [train._fingerprint, {s: d._fingerprint for s, d in evals.items()},
                    task["tfidf"], task["imbalance"]["method"], task["metrics"]]
        key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
        cached = cache_root() / "baselines" / f"tfidf-{key}.json"
        if cached.is_file():
            return json.loads(cached.read_text())
        if len(set(train["label"])) < 2:
            raise PlmbenchError(f"task {task['name']}: the training sentences hold one class "
                                "only; raise task.max_train_samples for the TF-IDF baseline")
        options = task["tfidf"]
        vectorizer = TfidfVectorizer(ngram_range=tuple(options["ngram_range"]),
                                     min_df=options["min_df"],
                                     max_features=options["max_features"], sublinear_tf=True)
        weighted = task["imbalance"]["method"] != "none"
        model = LogisticRegression(C=options["C"], max_iter=options["max_iter"],
                                   class_weight="balanced" if weighted else None)
        model.fit(vectorizer.fit_transform(inputs(task, train)), train["label"])
        metrics = {}
        for split, rows in evals.items():
            spoiler = model.predict_proba(vectorizer.transform(inputs(task, rows)))[:, 1]
            computed = label_metrics(task["metrics"], 2)
            computed.update(torch.tensor(rows["label"]),
                            **label_predictions(torch.tensor(spoiler), 2))
            metrics[split] = computed.compute()
        atomic_write_text(cached, strict_json.dumps(metrics))
        return metrics
