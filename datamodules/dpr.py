"""Bi-encoder training data (DPR, Karpukhin et al. 2020, §3.2): training rows of (question,
positive passage, hard negative passage) and eval rows of (question, answers) with the eval
corpus of passages they are retrieved from. The rows are built by a function the task family
injects (``retrieval.dpr_data``: BM25 picks the hard negatives, a layer above this one); the
collate function, injected too, tokenizes with the bi-encoder's own question and passage
tokenizers, so batches are built in the loader's workers."""

from collections.abc import Callable, Mapping

import datasets

from datamodules.base import PlmDataModule, task_config

REQUIRED_KEYS = ("name", "dataset", "config", "splits", "batch_size")


class BiEncoderDataModule(PlmDataModule):
    """``train_data``: triples; ``eval_data``: per eval split the (question, answers) rows, and
    ``eval_corpus`` the (title, text) passages they are searched in."""

    def __init__(self, task: Mapping, collate: Callable, triples: Callable[..., datasets.Dataset],
                 eval_rows: Callable[..., tuple[datasets.Dataset, datasets.Dataset]],
                 seed: int = 0) -> None:
        super().__init__(task_config(task, REQUIRED_KEYS), collate, seed)
        self.triples, self.eval_rows = triples, eval_rows
        self.eval_corpus: list[datasets.Dataset] = []

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:
            return
        train = self.task["splits"].get("train")
        if train:
            self.train_data = self.triples(train, self.task.get("max_train_samples"))
        for split in self.eval_split_names:
            questions, corpus = self.eval_rows(split, self.task.get("max_eval_samples"))
            self.eval_data.append(questions)
            self.eval_corpus.append(corpus)

    @property
    def fingerprints(self) -> dict[str, str]:
        evals = zip(self.eval_split_names, self.eval_data, strict=True)
        splits = {"train": self.train_data, **dict(evals)}
        return {split: data._fingerprint for split, data in splits.items() if data is not None}
