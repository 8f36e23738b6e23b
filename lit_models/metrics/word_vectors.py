"""Intrinsic evaluation of word vectors: nearest neighbours, word similarity and analogies.

- Nearest neighbours: the words of highest cosine similarity to a query word, itself excluded
  (gensim's ``KeyedVectors.most_similar``).
- Word similarity (WordSim-353, Finkelstein et al. 2002; SimLex-999, Hill et al. 2015): the
  cosine of each pair's vectors against the human score, by Spearman's rank correlation (and
  Pearson's) from scipy, over the pairs whose two words are known, as gensim's
  ``evaluate_word_pairs`` computes them; ``oov`` is the share of pairs skipped.
- Analogies (Mikolov et al. 2013a's Google set, "a : b :: c : ?"): 3CosAdd, the word d maximising
  cos(d, b - a + c) over unit vectors, a, b and c excluded, among the ``restrict`` most frequent
  words; questions with a word outside them are skipped (``oov``), as gensim's
  ``evaluate_word_analogies`` does (tested against it on the same vectors).
"""

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from scipy import stats


def unit(vectors: torch.Tensor) -> torch.Tensor:
    """Each row scaled to length 1 (a zero row stays zero)."""
    return F.normalize(vectors.float(), dim=-1)


def nearest_neighbours(vectors: torch.Tensor, queries: torch.Tensor, k: int,
                       candidates: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids [Q, k], cosines [Q, k]) of the ``k`` rows most similar to each query row, the query
    itself excluded, among the first ``candidates`` rows (all by default)."""
    normed = unit(vectors)
    pool = normed if candidates is None else normed[:candidates]
    scores = normed[queries] @ pool.T
    own = queries[:, None] == torch.arange(len(pool), device=queries.device)[None]
    scores = scores.masked_fill(own, float("-inf"))
    cosines, ids = scores.topk(min(k, len(pool) - 1), dim=-1)
    return ids, cosines


def similarity_scores(model: Sequence[float], human: Sequence[float], pairs: int
                      ) -> dict[str, float]:
    """Spearman and Pearson correlation of the model's similarities with the human scores of
    the known pairs, and the share of the ``pairs`` in the set left out as unknown."""
    known = len(model)
    scores = {"oov": 1 - known / pairs if pairs else 0.0}
    if known < 2:
        return {**scores, "spearman": float("nan"), "pearson": float("nan")}
    return {**scores, "spearman": float(stats.spearmanr(model, human).statistic),
            "pearson": float(stats.pearsonr(model, human).statistic)}


def analogy_predictions(vectors: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                        c: torch.Tensor, restrict: int | None = None) -> torch.Tensor:
    """3CosAdd's answer to each "a : b :: c : ?" (ids [Q]) among the first ``restrict`` rows."""
    normed = unit(vectors)
    pool = normed if restrict is None else normed[:restrict]
    query = unit(normed[b] - normed[a] + normed[c])
    scores = query @ pool.T
    rows = torch.arange(len(a), device=a.device)
    for asked in (a, b, c):
        scores[rows, asked] = float("-inf")
    return scores.argmax(dim=-1)
