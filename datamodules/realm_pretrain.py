"""REALM pre-training data (Guu et al. 2020, §3.1-3.4): masked sentences of the knowledge
corpus's own passages, each with the row of the passage it was taken from (which the retriever
must not return: §3.4 "exclude trivial retrievals"). The examples are built by a function the
task family injects (it finds salient spans and tokenizes for both the reader and the query
encoder, layers above this one); the collate, injected too, draws each example's span.
Eval examples carry a ``mask_seed``, so every evaluation masks the same spans."""

import random
from collections.abc import Callable, Mapping

from datamodules.base import PlmDataModule, task_config

REQUIRED_KEYS = ("name", "splits", "batch_size", "eval_batch_size")


class MaskedSentencesDataModule(PlmDataModule):
    """``train_data`` and one ``eval_data`` list per eval split: ``examples(split)``'s dicts."""

    def __init__(self, task: Mapping, collate: Callable, examples: Callable[[str], list[dict]],
                 fingerprint: str, seed: int = 0) -> None:
        super().__init__(task_config(task, REQUIRED_KEYS), collate, seed)
        self.examples, self.fingerprint = examples, fingerprint

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:
            return
        train = self.task["splits"].get("train")
        if train:
            self.train_data = self.examples(train)
        for split in self.eval_split_names:
            rng = random.Random(f"{self.seed}:{split}")
            self.eval_data.append([{**example, "mask_seed": rng.getrandbits(63)}
                                   for example in self.examples(split)])

    @property
    def fingerprints(self) -> dict[str, str]:
        """The knowledge corpus the sentences are drawn from (every split is a part of it)."""
        return {"corpus": self.fingerprint}
