"""Open-domain question answering data: questions with their reference answers, the passages a
retriever returns for them, and the reader's (question, passage) windows.

Chen et al. 2017 (DrQA) and Karpukhin et al. 2020 (DPR), §6: a question comes without its
paragraph; a retriever picks the top k passages of a large corpus, and a reader extracts the
answer from them. The eval questions (``task.questions``: their dataset's id, question and answer
columns; the answers a list of strings, or SQuAD's {text: [...]}) are handed to a ``retrieve``
function the task family injects (this layer knows no retriever), and the first
``read_top_k`` passages of each become (question, passage) rows in SQuAD's schema that the
extractive reader's windowing (``datamodules.squad``) cuts as for SQuAD; the row of question q
and its passage of rank r is ``<q id>@<r>``. The reader trains on SQuAD-format data
(``train_source``: the question, its gold paragraph and answer span), as DPR's reader trained
on gold-and-retrieved passages of the same datasets.
"""

from collections.abc import Callable, Mapping, Sequence

import datasets
import numpy as np

from datamodules.errors import PlmbenchError
from datamodules.sources import load_split
from datamodules.squad import MODEL_KEYS, SquadDataModule, load_examples
from datamodules.summarization import SummarizationDataModule
from datamodules.tokenization import TextTokenizer

QUESTION_KEYS = ("question_field", "answers_field", "match")
#: (rows [Q, k], scores [Q, k], seconds) of the top k passages of each question
Retrieve = Callable[[list[str]], tuple[np.ndarray, np.ndarray, float]]


def _answers(value) -> list[str]:
    """A reference list from the dataset's answer column (a list, or SQuAD's {text: [...]})."""
    if isinstance(value, Mapping):
        value = value["text"]
    return [value] if isinstance(value, str) else [str(a) for a in value]


def load_questions(task: Mapping, split: str, cap: int | None) -> datasets.Dataset:
    """id, question, answers (a list of strings) of the eval split's first ``cap`` questions."""
    spec = task["questions"]
    missing = [k for k in QUESTION_KEYS if k not in spec]
    if missing:
        raise PlmbenchError(f"task {task['name']}: questions lacks keys {missing}; add them")
    id_field = spec.get("id_field")
    columns = [spec["question_field"], spec["answers_field"], *filter(None, [id_field])]
    raw = load_split(task["dataset"], task["config"], split, columns, task.get("hub_id"))
    if cap is not None:
        raw = raw.select(range(min(cap, len(raw))))
    ids = [str(i) for i in raw[id_field]] if id_field else [f"{split}-{i}" for i in
                                                             range(len(raw))]
    return datasets.Dataset.from_dict({
        "id": ids, "question": [q.strip() for q in raw[spec["question_field"]]],
        "answers": [_answers(a) for a in raw[spec["answers_field"]]]})


class OpenQADataModule(SquadDataModule):
    """Training windows of the reader's SQuAD-format data; per eval split the questions
    (``questions``), what was retrieved for them (``retrieved``: rows, scores, seconds) and the
    windows of their top ``read_top_k`` passages."""

    def __init__(self, task: Mapping, tokenizer: TextTokenizer, corpus: datasets.Dataset,
                 retrieve: Retrieve, seed: int = 0) -> None:
        super().__init__(task, tokenizer, seed)
        self.corpus, self.retrieve = corpus, retrieve
        self.questions: list[datasets.Dataset] = []
        self.retrieved: list[tuple[np.ndarray, np.ndarray, float]] = []

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:
            return
        task = self.task
        train_split = task["splits"].get("train")
        if train_split:
            self.train_data = self._windows(self._train_examples(train_split), train_split, True)
        for split in self.eval_split_names:
            questions = load_questions(task, split, task.get("max_eval_samples"))
            retrieved = self.retrieve(questions["question"])
            pairs = self._pairs(questions, retrieved[0][:, : task["read_top_k"]])
            windows = self._windows(pairs, split, train=False)
            self.questions.append(questions)
            self.retrieved.append(retrieved)
            self.eval_examples.append(pairs)
            self.eval_windows.append(windows)
            self.eval_data.append(windows.select_columns(list(MODEL_KEYS))
                                  .add_column("index", list(range(len(windows)))))

    def _train_examples(self, split: str) -> datasets.Dataset:
        return load_examples(self.task, split, self.task.get("max_train_samples"), train=True)

    def _pairs(self, questions: datasets.Dataset, rows: np.ndarray) -> datasets.Dataset:
        """(question, passage) rows in SQuAD's schema, the passages in rank order."""
        task = self.task
        ids, contexts, asked = [], [], []
        texts = passage_texts(self.corpus, rows.tolist())
        for qid, question, passages in zip(questions["id"], questions["question"], texts,
                                           strict=True):
            for rank, text in enumerate(passages):
                ids.append(f"{qid}@{rank}")
                contexts.append(text)
                asked.append(question)
        empty = [{"text": [], "answer_start": []}] * len(ids)
        return datasets.Dataset.from_dict({task["id_field"]: ids, task["context_field"]: contexts,
                                           task["question_field"]: asked,
                                           task["answers_field"]: empty})

    @property
    def fingerprints(self) -> dict[str, str]:
        return {**super().fingerprints, "corpus": self.corpus._fingerprint}


def passage_texts(corpus: datasets.Dataset, rows: Sequence[Sequence[int]]) -> list[list[str]]:
    """The texts of retrieved corpus rows (-1 rows dropped)."""
    kept = [[int(r) for r in ranked if r >= 0] for ranked in rows]
    flat = corpus[[r for ranked in kept for r in ranked]]["text"]
    out, at = [], 0
    for ranked in kept:
        out.append(flat[at:at + len(ranked)])
        at += len(ranked)
    return out


class ClosedBookDataModule(SummarizationDataModule):
    """Question -> answer pairs for a sequence-to-sequence model with no passage (Roberts et al.
    2020): training pairs are the reader's SQuAD-format training questions with their first
    answer, eval pairs the task's questions with their first reference (all of them are in
    ``answer_sets``, which EM is taken against)."""

    def __init__(self, task: Mapping, tokenizer: TextTokenizer, decoder_start_token_id: int,
                 seed: int = 0) -> None:
        task = {**task, "source_field": "question", "target_field": "answer", "id_field": "id"}
        super().__init__(task, tokenizer, decoder_start_token_id, seed)
        self.answer_sets: dict[str, list[list[str]]] = {}

    def _raw(self, split: str, cap: int | None) -> datasets.Dataset:
        if split not in self.eval_split_names:
            rows = load_examples(self.task, split, cap, train=True)
            return datasets.Dataset.from_dict({
                "id": rows[self.task["id_field"]], "question": rows[self.task["question_field"]],
                "answer": [_answers(a)[0] if _answers(a) else ""
                           for a in rows[self.task["answers_field"]]]})
        questions = load_questions(self.task, split, cap)
        self.answer_sets[split] = questions["answers"]
        return questions.map(lambda row: {"answer": row["answers"][0] if row["answers"] else ""},
                             remove_columns=["answers"])
