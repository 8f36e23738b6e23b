"""The inverse cloze task (ICT, Lee et al. 2019, "Latent Retrieval for Weakly Supervised Open
Domain Question Answering", §5), which REALM (Guu et al. 2020, §3.4) warm-starts its retriever
with: a sentence of a passage is a pseudo-question, the passage its positive "evidence", the other
passages of the batch the negatives (in-batch softmax, as DPR's loss without hard negatives). The
sentence is removed from its passage, except with probability ``keep_probability`` (0.1 in the
paper), so the retriever learns both word matching and the context a sentence lives in.

``ict_pairs`` returns DPR's training rows (``retrieval.dpr_data``) without the negative columns:
question, positive_title, positive_text.
"""

import random
from collections.abc import Mapping

import datasets
import regex

from datamodules.errors import PlmbenchError
from datamodules.squad import load_examples
from retrieval.passages import split_words

#: sentence ends: ., ! or ? and spaces, before an upper-case letter or a digit
SENTENCE_END = regex.compile(r"(?<=[.!?])\s+(?=[\p{Lu}\d])")


def sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text.strip()) if s]


def ict_example(text: str, rng: random.Random, keep_probability: float
                ) -> tuple[str, str] | None:
    """(pseudo-question, evidence) of a passage of two sentences or more, else None."""
    parts = sentences(text)
    if len(parts) < 2:
        return None
    i = rng.randrange(len(parts))
    evidence = parts if rng.random() < keep_probability else parts[:i] + parts[i + 1:]
    return parts[i], " ".join(evidence)


def ict_pairs(task: Mapping, split: str, cap: int | None, words: int = 100
              ) -> datasets.Dataset:
    """ICT rows from the 100-word passages of the split's distinct paragraphs (seeded by
    ``task.ict.seed``)."""
    rows = load_examples(task, split, cap, train=True)
    titles = rows["title"] if "title" in rows.column_names else [""] * len(rows)
    rng = random.Random(task["ict"]["seed"])
    out: dict[str, list] = {"question": [], "positive_title": [], "positive_text": []}
    for context, title in dict(zip(rows[task["context_field"]], titles, strict=True)).items():
        for passage in split_words(context, words):
            example = ict_example(passage, rng, task["ict"]["keep_probability"])
            if example is not None:
                out["question"].append(example[0])
                out["positive_title"].append(title)
                out["positive_text"].append(example[1])
    if not out["question"]:
        raise PlmbenchError(f"task {task['name']}: split {split} has no passage of two "
                            "sentences for ICT; raise task.max_train_samples")
    return datasets.Dataset.from_dict(out)
