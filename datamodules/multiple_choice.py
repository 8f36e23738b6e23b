"""Multiple-choice data: a context and several candidate continuations or answers, one right.

Each choice is encoded with its context as one sequence pair, "[CLS] context [SEP] choice [SEP]"
(Devlin et al. 2019, §4.4, SWAG; Liu et al. 2019 and Lan et al. 2020, RACE): the context is
segment A, so truncation to ``task.max_length`` cuts a long RACE article first. An example holds
the pairs of all its choices, and the label is the index of the right one; the collate flattens a
batch of B examples of C choices into B x C sequences, in example order.

How a dataset's rows become (context, choices, label) is its ``format`` (``FORMATS``), each over
the hub's column schema:

- ``swag`` (``allenai/swag`` config ``regular``): context ``sent1``, choice i ``sent2`` + " " +
  ``ending<i>`` (the second sentence's start completed by each ending, as BERT read SWAG);
- ``race`` (``ehovy/race`` configs ``middle``, ``high``, ``all``): context ``article``, choice the
  ``question`` with its blank "_" filled by the option, or question + " " + option when it has no
  blank (RoBERTa's RACE input); the label is ``answer``'s letter A-D;
- ``copa`` (``aps/super_glue`` config ``copa``): context ``premise``, choice i "because" (question
  ``cause``) or "so" (``effect``) + " " + ``choice<i>`` with its first letter lowered.
"""

from collections.abc import Callable, Iterator, Mapping
from functools import partial

import datasets
import torch

from datamodules.base import check_option, task_config
from datamodules.collate import pad_collate
from datamodules.errors import PlmbenchError
from datamodules.glue import GlueDataModule
from datamodules.sources import load_split

REQUIRED_KEYS = ("name", "dataset", "config", "format", "num_labels", "splits", "max_length",
                 "batch_size")
#: one row per question -> (contexts, choices per context, labels)
Reader = Callable[[Mapping[str, list]], tuple[list[str], list[list[str]], list[int]]]


def swag(rows: Mapping[str, list]) -> tuple[list[str], list[list[str]], list[int]]:
    endings = zip(*(rows[f"ending{i}"] for i in range(4)), strict=True)
    choices = [[f"{start} {ending}" for ending in options]
               for start, options in zip(rows["sent2"], endings, strict=True)]
    return list(rows["sent1"]), choices, list(rows["label"])


def _fill(question: str, option: str) -> str:
    return question.replace("_", option) if "_" in question else f"{question} {option}"


def race(rows: Mapping[str, list]) -> tuple[list[str], list[list[str]], list[int]]:
    choices = [[_fill(question, option) for option in options]
               for question, options in zip(rows["question"], rows["options"], strict=True)]
    return list(rows["article"]), choices, ["ABCDEFGH".index(a) for a in rows["answer"]]


def copa(rows: Mapping[str, list]) -> tuple[list[str], list[list[str]], list[int]]:
    def lowered(text: str) -> str:
        return text[:1].lower() + text[1:]

    connectives = [{"cause": "because", "effect": "so"}[q] for q in rows["question"]]
    choices = [[f"{word} {lowered(c1)}", f"{word} {lowered(c2)}"]
               for word, c1, c2 in zip(connectives, rows["choice1"], rows["choice2"], strict=True)]
    return list(rows["premise"]), choices, list(rows["label"])


#: format -> (the hub columns it reads, the reader)
FORMATS: dict[str, tuple[tuple[str, ...], Reader]] = {
    "swag": (("sent1", "sent2", "ending0", "ending1", "ending2", "ending3", "label"), swag),
    "race": (("article", "question", "options", "answer"), race),
    "copa": (("premise", "choice1", "choice2", "question", "label"), copa),
}


def choices_collate(examples: list[Mapping], pad_id: int) -> dict[str, torch.Tensor]:
    """B examples of C choices -> B x C padded sequences (example-major), B labels and, where the
    split has it, B row indices (what the predictions files are keyed by)."""
    sequences = [{"input_ids": ids, "token_type_ids": types}
                 for example in examples
                 for ids, types in zip(example["input_ids"], example["token_type_ids"],
                                       strict=True)]
    batch = pad_collate(sequences, pad_id)
    batch["labels"] = torch.tensor([example["labels"] for example in examples])
    if "index" in examples[0]:
        batch["index"] = torch.tensor([example["index"] for example in examples])
    return batch


class MultipleChoiceDataModule(GlueDataModule):
    """Tokenized multiple-choice splits: per example, every (context, choice) pair."""

    def __init__(self, task, tokenizer, seed: int = 0) -> None:
        super().__init__(task, tokenizer, seed)
        self.collate_fn = partial(choices_collate, pad_id=tokenizer.special.pad)

    @classmethod
    def checked(cls, task) -> dict:
        config = task_config(task, REQUIRED_KEYS)
        check_option(config, "format", config["format"], sorted(FORMATS))
        if config.get("group_by_length"):
            raise PlmbenchError(f"task {config['name']}: group_by_length groups sequences, and "
                                "a multiple-choice example is several; set it to false")
        return config

    @classmethod
    def rows(cls, task: dict, split: str, cap: int | None) -> datasets.Dataset:
        columns = FORMATS[task["format"]][0]
        raw = load_split(task["dataset"], task["config"], split, columns, task.get("hub_id"))
        return raw if cap is None else raw.select(range(min(cap, len(raw))))

    @classmethod
    def read(cls, task: dict, rows: Mapping[str, list]
             ) -> tuple[list[str], list[list[str]], list[int]]:
        """(contexts, choices, labels) of ``rows``, each question with ``num_labels`` choices."""
        contexts, choices, labels = FORMATS[task["format"]][1](rows)
        for options in choices:
            if len(options) != task["num_labels"]:
                raise PlmbenchError(
                    f"task {task['name']}: a question has {len(options)} choices, not "
                    f"num_labels={task['num_labels']}; fix num_labels in the task YAML"
                )
        return contexts, choices, labels

    @classmethod
    def texts(cls, task: dict, rows: datasets.Dataset) -> Iterator[str]:
        contexts, choices, _ = cls.read(task, rows.to_dict())
        return iter([*contexts, *(choice for options in choices for choice in options)])

    @classmethod
    def label_column(cls, task: dict, rows) -> list:
        rows = rows.to_dict() if isinstance(rows, datasets.Dataset) else rows
        return cls.read(task, rows)[2]

    @property
    def features(self) -> datasets.Features:
        return datasets.Features(
            input_ids=datasets.Sequence(datasets.Sequence(datasets.Value("int32"))),
            token_type_ids=datasets.Sequence(datasets.Sequence(datasets.Value("int8"))),
            labels=datasets.Value("int64"),
        )

    def _encode(self, batch: dict[str, list]) -> dict[str, list]:
        contexts, choices, labels = self.read(self.task, batch)
        pairs = [(context, choice) for context, options in zip(contexts, choices, strict=True)
                 for choice in options]
        encodings = self.encoder.encode_batch(pairs)
        C = self.task["num_labels"]
        grouped = [encodings[i:i + C] for i in range(0, len(encodings), C)]
        return {"input_ids": [[e.ids for e in group] for group in grouped],
                "token_type_ids": [[e.type_ids for e in group] for group in grouped],
                "labels": labels}
