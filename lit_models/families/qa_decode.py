"""From start/end logits of every window to one answer span per question, vectorised.

Devlin et al. 2019 (BERT), §4.2: the score of the span from token i to token j is S·T_i + E·T_j
(start logit + end logit), the prediction the best span with j >= i; as BERT's run_squad.py
does, only the n best start and n best end tokens of each window are paired (n_best = 20), spans
longer than ``max_answer_length`` tokens (30) or outside the context are dropped, and the best
span over all windows of a question is mapped back to the context text through the tokens'
character offsets. §4.3 (SQuAD v2.0): the null answer scores s_null = S·C + E·C at the start
token C, the smallest over the question's windows, and the question's null odds are
s_null - (best non-null span score), which the scorer compares with a threshold.
"""

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

#: null odds of a question whose windows hold no valid span at all
NO_SPAN_ODDS = 1.0e4


@dataclass
class Windows:
    """What post-processing needs of the eval windows, padded to one length T."""

    example_index: Tensor  # [F] the question each window belongs to
    cls_index: Tensor  # [F] the start token (null answer)
    offset_start: Tensor  # [F, T] character where a context token starts, -1 elsewhere
    offset_end: Tensor  # [F, T] character where it ends

    @classmethod
    def from_rows(cls, example_index, cls_index, offset_start, offset_end) -> "Windows":
        """From per-window lists (of uneven lengths)."""
        length = max(len(o) for o in offset_start)

        def padded(rows) -> Tensor:
            out = torch.full((len(rows), length), -1, dtype=torch.long)
            for i, row in enumerate(rows):
                out[i, : len(row)] = torch.as_tensor(row)
            return out

        return cls(torch.as_tensor(example_index), torch.as_tensor(cls_index),
                   padded(offset_start), padded(offset_end))


@dataclass
class Spans:
    """One answer per question: its character span, score and null odds."""

    start_char: np.ndarray  # [N]
    end_char: np.ndarray  # [N]
    has_span: np.ndarray  # [N] False where no window holds a valid span
    null_odds: np.ndarray  # [N] s_null - best span score
    score: np.ndarray  # [N] the best span's score S·T_i + E·T_j (-inf where no span)

    def texts(self, contexts: list[str]) -> list[str]:
        return [context[s:e] if ok else "" for context, s, e, ok in
                zip(contexts, self.start_char, self.end_char, self.has_span, strict=True)]


def best_spans(start_logits: Tensor, end_logits: Tensor, windows: Windows, num_examples: int,
               n_best: int = 20, max_answer_length: int = 30) -> Spans:
    """The best span of each of ``num_examples`` questions over its windows' logits [F, T]."""
    F, T = start_logits.shape
    start_logits, end_logits = start_logits.float(), end_logits.float()
    in_context = windows.offset_start[:, :T] >= 0
    k = min(n_best, T)
    minus_inf = torch.tensor(float("-inf"))
    top_start, start_at = torch.where(in_context, start_logits, minus_inf).topk(k, dim=1)
    top_end, end_at = torch.where(in_context, end_logits, minus_inf).topk(k, dim=1)
    scores = top_start[:, :, None] + top_end[:, None, :]  # [F, k starts, k ends]
    length = end_at[:, None, :] - start_at[:, :, None]
    valid = (length >= 0) & (length < max_answer_length) & scores.isfinite()
    best_score, flat = torch.where(valid, scores, minus_inf).flatten(1).max(dim=1)
    start_token = start_at.gather(1, (flat // k)[:, None])
    end_token = end_at.gather(1, (flat % k)[:, None])
    rows = torch.arange(F)
    null = start_logits[rows, windows.cls_index] + end_logits[rows, windows.cls_index]

    # per question: the window with the best span (first on ties), the smallest null score
    index = windows.example_index.numpy()
    score = best_score.numpy()
    order = np.lexsort((-score, index))  # by question, best window first
    questions, first = np.unique(index[order], return_index=True)
    chosen = order[first]
    start_char = np.zeros(num_examples, dtype=np.int64)
    end_char = np.zeros(num_examples, dtype=np.int64)
    best = np.full(num_examples, -np.inf)
    start_char[questions] = windows.offset_start.gather(1, start_token)[chosen, 0].numpy()
    end_char[questions] = windows.offset_end.gather(1, end_token)[chosen, 0].numpy()
    best[questions] = score[chosen]
    null_score = torch.full((num_examples,), float("inf"))
    null_score.scatter_reduce_(0, windows.example_index, null, "amin")
    has_span = np.isfinite(best)
    odds = np.where(has_span, null_score.numpy() - np.where(has_span, best, 0.0), NO_SPAN_ODDS)
    return Spans(start_char, end_char, has_span, odds, best)
