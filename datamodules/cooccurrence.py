"""GloVe's word-word co-occurrence counts X_ij (Pennington et al. 2014, §3; ``cooccur.c``).

As the reference ``cooccur`` counts them: words outside the vocabulary are dropped before the
window is applied (so they take no place in it), a window never crosses the end of a sentence
(``cooccur.c``: of a line), each context word k <= ``window`` places to the left of word j adds
1/k to X[context, word] (``distance_weighting``; else 1), and with ``symmetric`` the same to
X[word, context], so right contexts count too. Computed in torch, a chunk of sentences at a time:
pairs as keys i * V + j, summed by ``torch.unique``; the matrix is its non-zero entries.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch


@dataclass
class Cooccurrences:
    """The non-zero entries of X: rows i, columns j, values X_ij (float64), by key i * V + j."""

    rows: torch.Tensor
    cols: torch.Tensor
    values: torch.Tensor

    def __len__(self) -> int:
        return len(self.values)

    def dense(self, vocab_size: int) -> torch.Tensor:
        x = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
        x[self.rows, self.cols] = self.values
        return x


def _merge(keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    unique, inverse = torch.unique(keys, return_inverse=True)
    return unique, torch.zeros(len(unique), dtype=torch.float64).index_add_(0, inverse, values)


def _chunk_pairs(sentences: Sequence[Sequence[int]], vocab_size: int, window: int,
                 symmetric: bool, distance_weighting: bool) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.cat([torch.as_tensor(s, dtype=torch.int64) for s in sentences])
    which = torch.repeat_interleave(torch.arange(len(sentences)),
                                    torch.tensor([len(s) for s in sentences]))
    keys, values = [], []
    for distance in range(1, window + 1):
        same = which[:-distance] == which[distance:]
        context, word = ids[:-distance][same], ids[distance:][same]
        weight = torch.full((len(word),), 1.0 / distance if distance_weighting else 1.0,
                            dtype=torch.float64)
        keys.append(context * vocab_size + word)
        values.append(weight)
        if symmetric:
            keys.append(word * vocab_size + context)
            values.append(weight)
    return _merge(torch.cat(keys), torch.cat(values))


def count_cooccurrences(sentences: Iterable[Sequence[int]], vocab_size: int, window: int,
                        symmetric: bool = True, distance_weighting: bool = True,
                        chunk_tokens: int = 1_000_000) -> Cooccurrences:
    """X over ``sentences`` of in-vocabulary word ids (ids in [0, vocab_size)), summed
    ``chunk_tokens`` words at a time."""
    keys = torch.empty(0, dtype=torch.int64)
    values = torch.empty(0, dtype=torch.float64)
    chunk: list[Sequence[int]] = []
    size = 0

    def flush() -> None:
        nonlocal keys, values, chunk, size
        if size:
            new_keys, new_values = _chunk_pairs(chunk, vocab_size, window, symmetric,
                                                distance_weighting)
            keys, values = _merge(torch.cat([keys, new_keys]), torch.cat([values, new_values]))
        chunk, size = [], 0

    for sentence in sentences:
        if len(sentence) > 1:
            chunk.append(sentence)
            size += len(sentence)
        if size >= chunk_tokens:
            flush()
    flush()
    return Cooccurrences(keys // vocab_size, keys % vocab_size, values)
