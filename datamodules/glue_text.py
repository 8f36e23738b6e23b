"""GLUE as text-to-text (Raffel et al. 2020, §2.4 and Appendix D): every task is text in, text
out. The input names the task and each field, "sst2 sentence: it was great", "mrpc sentence1:
... sentence2: ..." (the GLUE config name and the dataset's column names, as T5's preprocessors
write them); the target is the label's name ("positive", "not_entailment", ...) or, for STS-B's
0..5 similarity, the score rounded to the nearest 0.2 as text ("3.8"). The references that
generations are scored against are the label names, and STS-B's unrounded scores; unlabelled
rows (GLUE AX, label -1) have none.

The examples are those of ``summarization.SummarizationDataModule`` (encoder-decoder or
decoder-only layouts, row indices, ``texts``) built from these texts.
"""

import json
from collections.abc import Iterator, Mapping

from omegaconf import DictConfig

from datamodules import glue
from datamodules.base import task_config
from datamodules.sources import load_split
from datamodules.summarization import SummarizationDataModule

REQUIRED_KEYS = (*glue.REQUIRED_KEYS, "label_names", "source_max_length", "target_max_length")


def sources(task: Mapping, rows: Mapping[str, list]) -> list[str]:
    """ "<task> <field>: <text> <field>: <text>" per row."""
    columns = [rows[field] for field in task["text_fields"]]
    return [" ".join([task["config"], *(f"{field}: {text}" for field, text in
                                        zip(task["text_fields"], texts, strict=True))])
            for texts in zip(*columns, strict=True)]


def label_text(task: Mapping, label: float) -> str:
    """A label as the model writes it: its name, or a score rounded to 0.2 ("3.8")."""
    if task["num_labels"] == 1:
        return f"{round(label * 5) / 5:.1f}"
    return task["label_names"][label]


def label_texts(task: Mapping) -> list[str]:
    """Every text a label can be written as (STS-B: 0.0, 0.2, ..., 5.0)."""
    if task["num_labels"] == 1:
        return [label_text(task, i / 5) for i in range(26)]
    return list(task["label_names"])


def vocabulary_corpus(task: Mapping | DictConfig) -> tuple[str, Iterator[str]]:
    """The capped training split's inputs and targets as the model reads them (task and field
    names, label names: a scratch vocabulary must spell them)."""
    task = task_config(task, glue.REQUIRED_KEYS)
    split, cap = task["splits"]["train"], task.get("max_train_samples")
    raw = load_split(task["dataset"], task["config"], split,
                     [*task["text_fields"], task["label_field"]], task.get("hub_id"))
    rows = (raw if cap is None else raw.select(range(min(cap, len(raw))))).to_dict()
    texts = [*sources(task, rows), *(label_text(task, y) for y in rows[task["label_field"]])]
    key = json.dumps(["text-to-text", task["dataset"], task["config"], split, raw._fingerprint,
                      task["text_fields"], cap])
    return key, iter(texts)


class GlueTextDataModule(SummarizationDataModule):
    """A GLUE-style task's rows as (input text, label text) pairs."""

    required_keys = REQUIRED_KEYS

    def columns(self) -> list[str]:
        return [*self.task["text_fields"], self.task["label_field"]]

    def sources(self, rows: dict[str, list]) -> list[str]:
        return sources(self.task, rows)

    def targets(self, rows: dict[str, list]) -> list[str]:
        return [label_text(self.task, y) if y >= 0 else "" for y in rows[self.task["label_field"]]]

    def references(self, rows: dict[str, list]) -> list[str]:
        """Label names; STS-B's scores unrounded."""
        labels = rows[self.task["label_field"]]
        if self.task["num_labels"] == 1:
            return [str(y) for y in labels]
        return [self.task["label_names"][y] if y >= 0 else "" for y in labels]
