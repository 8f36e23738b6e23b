"""Questions with their answers, as raw text, for readers that retrieve while they train (REALM,
Guu et al. 2020; RAG, Lewis et al. 2020).

Their passages depend on the question encoder at the step they are read, so batches hold no
tokens but the question encoder's: a training item is a question and its reference answers (the
task's SQuAD-format ``train_source``), an eval item a question of ``task.questions`` with its id,
its answers and its row index (which travels with it, so outputs gathered over DDP's ranks are
matched); the collate adds the questions' tokens (``input_ids``, ``attention_mask``, ... of the
question encoder, which the throughput counts). The module retrieves, tokenizes passages and
reads in its steps.
"""

from collections.abc import Callable, Mapping, Sequence
from functools import partial

from datamodules.base import PlmDataModule
from datamodules.open_qa import _answers, load_questions
from datamodules.squad import load_examples


def collate_items(items: list[Mapping], tokenize: Callable[[Sequence[str]], dict]) -> dict:
    """A batch of dicts -> a dict of lists, and the token tensors of its questions."""
    batch = {key: [item[key] for item in items] for key in items[0]}
    return batch | tokenize(batch["question"])


class QuestionsDataModule(PlmDataModule):
    """``train_data``: {question, answers} rows of the training questions with an answer;
    ``eval_data``: one {index, id, question, answers} list per eval split (``questions`` holds
    them as ``datasets.Dataset``s for the predictions file)."""

    def __init__(self, task: Mapping, tokenize: Callable[[Sequence[str]], dict],
                 seed: int = 0) -> None:
        super().__init__(task, partial(collate_items, tokenize=tokenize), seed)
        self.questions = []

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:
            return
        task = self.task
        if task["splits"].get("train"):
            rows = load_examples(task, task["splits"]["train"], task.get("max_train_samples"),
                                 train=True)
            pairs = zip(rows[task["question_field"]], rows[task["answers_field"]], strict=True)
            self.train_data = [{"question": q.strip(), "answers": _answers(a)}
                               for q, a in pairs if _answers(a)]
        for split in self.eval_split_names:
            questions = load_questions(task, split, task.get("max_eval_samples"))
            self.questions.append(questions)
            self.eval_data.append([{"index": i, **row} for i, row in enumerate(questions)])
