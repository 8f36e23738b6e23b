"""Questions answered by scoring each candidate answer on its own: SuperGLUE's MultiRC and ReCoRD
as its BERT baseline reads them (Wang et al. 2019, §5: "for each answer choice, we concatenate the
context with that answer choice"; MultiRC's options each to a logistic regression, ReCoRD's
candidates each scored independently and the most likely one taken).

Every candidate is one sequence pair, a binary example (1: a right answer), and belongs to a
``group`` (its question) that evaluation reads together (``lit_models/families/candidates.py``):

- ``multirc`` (``aps/super_glue`` config ``multirc``: a row per answer option): "[CLS] paragraph
  [SEP] question answer [SEP]", label the option's, group "<paragraph idx>-<question idx>";
- ``record`` (config ``record``: a row per query): for each distinct entity of ``entities``, in
  order, "[CLS] passage [SEP] query [SEP]" with the query's "@placeholder" replaced by the entity,
  label whether the entity is one of ``answers``, group "<passage idx>-<query idx>". The
  passage's "@highlight" markers (the article's summary bullets) are read as "- " lines, as
  jiant's SuperGLUE baseline reads them.

``max_train_samples`` / ``max_eval_samples`` cap the questions (whole groups), not the candidates.
A split's candidate rows keep their ``group``, ``text`` (the option or entity), ``answers``
(ReCoRD's gold entities) and ``idx`` (the hub's, for the prediction files) for evaluation.
"""

from collections.abc import Iterator, Mapping

import datasets

from datamodules.base import check_option, task_config
from datamodules.glue import GlueDataModule
from datamodules.sources import load_split

REQUIRED_KEYS = ("name", "dataset", "config", "format", "splits", "max_length", "batch_size")
#: format -> the hub columns it reads
COLUMNS = {"multirc": ("paragraph", "question", "answer", "idx", "label"),
           "record": ("passage", "query", "entities", "answers", "idx")}
#: the columns of a candidate row
CANDIDATE = ("first", "second", "label", "group", "text", "answers", "idx")


def multirc(rows: Mapping[str, list]) -> dict[str, list]:
    return {
        "first": list(rows["paragraph"]),
        "second": [f"{q} {a}" for q, a in zip(rows["question"], rows["answer"], strict=True)],
        "label": list(rows["label"]),
        "group": [f"{i['paragraph']}-{i['question']}" for i in rows["idx"]],
        "text": list(rows["answer"]),
        "answers": [[] for _ in rows["idx"]],
        "idx": list(rows["idx"]),
    }


def record(rows: Mapping[str, list]) -> dict[str, list]:
    out = {column: [] for column in CANDIDATE}
    for passage, query, entities, answers, idx in zip(*(rows[c] for c in COLUMNS["record"]),
                                                      strict=True):
        passage = passage.replace("@highlight\n", "- ")
        for entity in dict.fromkeys(entities):  # distinct, in order
            for column, value in (("first", passage),
                                  ("second", query.replace("@placeholder", entity)),
                                  ("label", int(entity in answers)),
                                  ("group", f"{idx['passage']}-{idx['query']}"),
                                  ("text", entity), ("answers", list(answers)), ("idx", idx)):
                out[column].append(value)
    return out


FORMATS = {"multirc": multirc, "record": record}


def groups_cap(raw: datasets.Dataset, task_format: str, cap: int) -> int:
    """How many leading rows hold the first ``cap`` questions."""
    if task_format == "record":  # a row per query
        return min(cap, len(raw))
    seen: set = set()
    for row, idx in enumerate(raw["idx"]):
        seen.add((idx["paragraph"], idx["question"]))
        if len(seen) > cap:
            return row
    return len(raw)


class CandidateDataModule(GlueDataModule):
    """Tokenized candidate rows (binary examples) of MultiRC or ReCoRD."""

    @classmethod
    def checked(cls, task) -> dict:
        config = task_config(task, REQUIRED_KEYS)
        check_option(config, "format", config["format"], sorted(FORMATS))
        return {**config, "text_fields": ["first", "second"], "label_field": "label",
                "num_labels": 2}

    @classmethod
    def rows(cls, task: dict, split: str, cap: int | None) -> datasets.Dataset:
        """The split's candidate rows (``CANDIDATE`` columns), of its first ``cap`` questions."""
        columns = COLUMNS[task["format"]]
        raw = load_split(task["dataset"], task["config"], split, columns, task.get("hub_id"))
        if cap is not None:
            raw = raw.select(range(groups_cap(raw, task["format"], cap)))
        # each candidate's row: the ``index`` column GlueDataModule joins after tokenizing
        return raw.map(FORMATS[task["format"]], batched=True, remove_columns=raw.column_names,
                       desc=f"candidates of {task['name']} {split}")

    @classmethod
    def texts(cls, task: dict, rows: datasets.Dataset) -> Iterator[str]:
        return iter([*dict.fromkeys(rows["first"]), *rows["second"]])

    def __init__(self, task, tokenizer, seed: int = 0) -> None:
        super().__init__(task, tokenizer, seed)
        self.eval_candidates: list[datasets.Dataset] | None = None

    def setup(self, stage: str | None = None) -> None:
        """The tokenized splits, and ``eval_candidates``: each eval split's candidate rows."""
        if self.eval_candidates is not None:
            return
        super().setup(stage)
        cap = self.task.get("max_eval_samples")
        self.eval_candidates = [self.rows(self.task, split, cap)
                                for split in self.eval_split_names]
