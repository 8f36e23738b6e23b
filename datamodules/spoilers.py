"""Sentence-level spoiler detection in Goodreads reviews (Wan et al. 2019, §4: a review's sentences
are labelled one by one, each read in its review).

The mirror holds one row per review (``datamodules/goodreads.py``); an example is one sentence of
it, read with ``task.context.sentences`` = k of its neighbours: "[CLS] sentence [SEP] the k
sentences before it, then the k after it [SEP]" (the sentence alone for k = 0), labelled 1 where
the reviewer marked it a spoiler. The review, user and book ids and the sentence's position stay in
every example's row. Spoilers are a small minority of sentences; ``task.imbalance.method``
``undersample`` keeps all the training spoilers and ``task.imbalance.ratio`` non-spoilers per
spoiler, drawn with the run's seed (``weighted`` weights the loss instead: the family's business).
``max_train_samples`` / ``max_eval_samples`` cap sentences, in review order.
"""

from collections.abc import Mapping
from functools import partial

import datasets
import numpy as np
import pyarrow.compute as pc

from datamodules.base import check_option, task_config
from datamodules.errors import PlmbenchError
from datamodules.glue import GlueDataModule
from datamodules.sources import load_split

REVIEW_COLUMNS = ("review_id", "user_id", "book_id", "sentences", "labels")
IMBALANCE = ("none", "weighted", "undersample")


def sentence_rows(reviews: Mapping[str, list], k: int) -> dict[str, list]:
    """One row per sentence of ``reviews``: the sentence, its k neighbours on each side, its
    label, its review's ids and its position in the review."""
    out = {key: [] for key in ("sentence", "context", "label", "review_id", "user_id", "book_id",
                               "position")}
    for review, user, book, sentences, labels in zip(*(reviews[c] for c in REVIEW_COLUMNS),
                                                     strict=True):
        for i, (sentence, label) in enumerate(zip(sentences, labels, strict=True)):
            neighbours = [*sentences[max(0, i - k):i], *sentences[i + 1:i + 1 + k]]
            for key, value in (("sentence", sentence), ("context", " ".join(neighbours)),
                               ("label", int(label)), ("review_id", review), ("user_id", user),
                               ("book_id", book), ("position", i)):
                out[key].append(value)
    return out


class SpoilerDataModule(GlueDataModule):
    """Tokenized spoiler sentences with their context, the training split rebalanced on request."""

    @classmethod
    def checked(cls, task) -> dict:
        config = task_config(task, ("context", "imbalance"))
        config = super().checked({**config, "text_fields": ["sentence"], "label_field": "label"})
        k = config["context"]["sentences"]
        method = config["imbalance"]["method"]
        if not isinstance(k, int) or k < 0:
            raise PlmbenchError(f"task {config['name']}: context.sentences={k!r}; give the "
                                "number of neighbours on each side, 0 for none")
        check_option(config, "imbalance.method", method, IMBALANCE)
        return {**config, "text_fields": ["sentence", "context"] if k else ["sentence"]}

    @classmethod
    def rows(cls, task: dict, split: str, cap: int | None) -> datasets.Dataset:
        """The sentences of ``split``'s reviews (its first ``cap``)."""
        reviews = load_split(task["dataset"], task["config"], split, REVIEW_COLUMNS,
                             task.get("hub_id"))
        if cap is not None:  # the reviews that hold the first cap sentences
            lengths = pc.list_value_length(reviews.data.column("labels")).to_numpy()
            needed = int(np.searchsorted(np.cumsum(lengths), cap)) + 1
            reviews = reviews.select(range(min(needed, len(reviews))))
        sentences = reviews.map(partial(sentence_rows, k=task["context"]["sentences"]),
                                batched=True, remove_columns=reviews.column_names,
                                desc=f"sentences of {task['name']} {split}")
        return sentences if cap is None else sentences.select(range(min(cap, len(sentences))))

    def setup(self, stage: str | None = None) -> None:
        """The splits; with ``imbalance.method: undersample`` the training split keeps every
        spoiler and ``imbalance.ratio`` non-spoilers per spoiler (all when fewer)."""
        if self.train_data is not None or self.eval_data:
            return
        super().setup(stage)
        if self.train_data is None or self.task["imbalance"]["method"] != "undersample":
            return
        labels = np.asarray(self.train_data["labels"])
        spoilers, others = np.flatnonzero(labels == 1), np.flatnonzero(labels != 1)
        keep = round(self.task["imbalance"]["ratio"] * len(spoilers))
        drawn = np.random.default_rng(self.seed).permutation(others)[:keep]
        self.train_data = self.train_data.select(np.sort(np.concatenate([spoilers, drawn])))
