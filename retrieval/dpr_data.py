"""DPR's training triples: a question, its positive passage and a BM25 hard negative.

Karpukhin et al. 2020 (DPR), §3.2 and §5.1: for SQuAD the positive passage is the (100-word)
passage of the gold paragraph that holds the answer; a hard negative is "the top passage returned
by BM25 which does not contain the answer but matches most question tokens"; the other questions'
passages of the batch are the in-batch negatives (the training module's business). Here the
corpus the negatives come from is the training questions' own paragraphs, split into passages.
"""

from collections.abc import Mapping

import datasets

from datamodules.errors import PlmbenchError
from datamodules.squad import load_examples
from lit_models.metrics.retrieval import has_answer
from retrieval.bm25 import BM25Index
from retrieval.passages import split_words

#: BM25 passages looked at for a hard negative (the first without the answer is taken)
NEGATIVE_DEPTH = 20


def dpr_triples(task: Mapping, split: str, cap: int | None, words: int = 100
                ) -> datasets.Dataset:
    """question, positive (title, text), hard negative (title, text) per SQuAD-format row whose
    paragraph holds its answer in some passage; rows without one are dropped."""
    rows = load_examples(task, split, cap, train=True)
    contexts = list(dict.fromkeys(rows[task["context_field"]]))
    titles = dict(zip(rows[task["context_field"]], rows["title"] if "title" in rows.column_names
                      else [""] * len(rows), strict=True))
    passages, titled, of_context = [], [], {}
    for context in contexts:
        blocks = split_words(context, words)
        of_context[context] = range(len(passages), len(passages) + len(blocks))
        passages += blocks
        titled += [titles[context]] * len(blocks)
    if not passages:
        raise PlmbenchError(f"task {task['name']}: split {split} has no paragraphs to train on")
    bm25 = BM25Index(passages)
    questions = rows[task["question_field"]]
    found, _ = bm25.search(questions, NEGATIVE_DEPTH)
    out: dict[str, list] = {k: [] for k in ("question", "positive_title", "positive_text",
                                            "negative_title", "negative_text")}
    for question, context, answers, ranked in zip(questions, rows[task["context_field"]],
                                                  rows[task["answers_field"]], found.tolist(),
                                                  strict=True):
        texts = answers["text"]
        positive = next((p for p in of_context[context] if has_answer(passages[p], texts)), None)
        negative = next((p for p in ranked if p >= 0 and not has_answer(passages[p], texts)),
                        None)
        if positive is None or negative is None:
            continue
        out["question"].append(question)
        out["positive_title"].append(titled[positive])
        out["positive_text"].append(passages[positive])
        out["negative_title"].append(titled[negative])
        out["negative_text"].append(passages[negative])
    return datasets.Dataset.from_dict(out)


def eval_questions(task: Mapping, split: str, cap: int | None, words: int = 100
                   ) -> tuple[datasets.Dataset, datasets.Dataset]:
    """(question + answers rows, the (title, text) passages of their distinct paragraphs)."""
    rows = load_examples(task, split, cap, train=False)
    questions = datasets.Dataset.from_dict({
        "question": rows[task["question_field"]],
        "answers": [a["text"] for a in rows[task["answers_field"]]]})
    titles = rows["title"] if "title" in rows.column_names else [""] * len(rows)
    corpus: dict[str, list] = {"title": [], "text": []}
    for context, title in dict(zip(rows[task["context_field"]], titles, strict=True)).items():
        blocks = split_words(context, words)
        corpus["title"] += [title] * len(blocks)
        corpus["text"] += blocks
    return questions, datasets.Dataset.from_dict(corpus)
