"""Retrieval metrics: top-k answer recall and MRR, on DPR's definition of a passage that holds
the answer.

Karpukhin et al. 2020 (DPR), §5.1: "top-k retrieval accuracy", the share of questions with a
passage holding an answer among the top k, where a passage holds an answer when the answer's
token sequence appears in the passage's (DPR's ``has_answer``: both texts NFD-normalised and cut
by its ``SimpleTokenizer`` into runs of letters/digits/marks and single other non-space
characters, compared uncased); for CuratedTREC the answers are regular expressions searched in
the NFD-normalised passage, case-insensitively (``match="regex"``, as DrQA and DPR do).
Retrieval is then scored by torchmetrics' retrieval metrics on (rank, holds-an-answer): recall@k
is ``RetrievalHitRate(top_k=k)``, MRR ``RetrievalMRR`` (the mean of 1 / the rank of the first
passage holding an answer, 0 when none of the retrieved does), both on 0..100. Registered as
``recall@1``, ``recall@5``, ``recall@20``, ``recall@100`` and ``mrr`` over ``rankings`` (each
question's retrieved passage texts, best first, against its answers).
"""

import unicodedata
from collections.abc import Sequence

import numpy as np
import regex
import torch
from torchmetrics.retrieval import RetrievalHitRate, RetrievalMRR

from lit_models.metrics.registry import register_metric

MATCHES = ("string", "regex")
#: DPR's SimpleTokenizer: alphanumeric runs (letters, numbers, marks) or one other non-space
TOKEN = regex.compile(r"[\p{L}\p{N}\p{M}]+|[^\p{Z}\p{C}]", flags=regex.IGNORECASE | regex.UNICODE
                      | regex.MULTILINE)
RECALL_AT = (1, 5, 20, 100)


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in TOKEN.findall(unicodedata.normalize("NFD", text))]


def _contains(tokens: Sequence[str], answer: Sequence[str]) -> bool:
    n = len(answer)
    return n > 0 and any(list(tokens[i:i + n]) == list(answer)
                         for i in range(len(tokens) - n + 1))


def regex_match(text: str, pattern: str) -> bool:
    """Whether the answer pattern occurs in ``text`` (an invalid pattern matches nothing)."""
    try:
        compiled = regex.compile(pattern, flags=regex.IGNORECASE | regex.UNICODE | regex.MULTILINE)
    except regex.error:
        return False
    return compiled.search(text) is not None


def has_answer(text: str, answers: Sequence[str], match: str = "string") -> bool:
    """DPR's ``has_answer``: does ``text`` hold one of ``answers``."""
    if match == "regex":
        text = unicodedata.normalize("NFD", text)
        return any(regex_match(text, unicodedata.normalize("NFD", a)) for a in answers)
    if match != "string":
        raise ValueError(f"match {match!r} is not one of {MATCHES}")
    tokens = _tokens(text)
    return any(_contains(tokens, _tokens(a)) for a in answers)


def answer_hits(passages: Sequence[Sequence[str]], answers: Sequence[Sequence[str]],
                match: str = "string", k: int | None = None) -> np.ndarray:
    """bool [Q, k]: whether question q's passage at rank r holds one of its answers (False past
    the end of a shorter list)."""
    k = k if k is not None else max((len(p) for p in passages), default=0)
    hits = np.zeros((len(passages), k), dtype=bool)
    for q, (texts, refs) in enumerate(zip(passages, answers, strict=True)):
        for r, text in enumerate(texts[:k]):
            hits[q, r] = has_answer(text, refs, match)
    return hits


def retrieval_metrics(hits: np.ndarray, recall_at: Sequence[int] = RECALL_AT) -> dict[str, float]:
    """recall@k and MRR, on 0..100, of hits [Q, K] (a k beyond K: every retrieved passage)."""
    queries, depth = hits.shape
    if queries == 0 or depth == 0:
        return {}
    # scores that give the rank order with no ties (torchmetrics mishandles non-positive ones)
    preds = torch.arange(depth, 0, -1, dtype=torch.float).repeat(queries)
    target = torch.from_numpy(hits.reshape(-1))
    indexes = torch.arange(queries).repeat_interleave(depth)
    metrics = {f"recall@{k}": RetrievalHitRate(top_k=k)(preds, target, indexes)
               for k in recall_at}
    metrics["mrr"] = RetrievalMRR()(preds, target, indexes)
    return {name: 100 * float(value) for name, value in metrics.items()}


@register_metric(*(f"recall@{k}" for k in RECALL_AT), "mrr", inputs="rankings", whole_split=True)
def ranking_metrics(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]],
                    match: str = "string", **_) -> dict[str, float]:
    """recall@k and MRR (0..100) of each question's retrieved passage texts (best first)."""
    depth = max((len(p) for p in predictions), default=0)
    return retrieval_metrics(answer_hits(predictions, references, match, max(depth, 1)))


def throughput(count: int, seconds: float) -> float:
    """Items per second (queries/s, passages/s)."""
    return count / max(seconds, 1e-9)
