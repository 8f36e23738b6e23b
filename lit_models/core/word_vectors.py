"""What the static word-vector modules share (word2vec through gensim, GloVe in torch): their
intrinsic evaluation and the vectors they leave.

At every validation each eval split (a word set of the task's ``intrinsic`` section, batched by
``datamodules/word_vectors.py``) is scored on the current vectors (``lit_models/metrics/
word_vectors.py``): similarity sets give ``spearman``, ``pearson`` and ``oov``, analogy sets
``accuracy`` (3CosAdd) and ``oov``; the nearest neighbours of ``intrinsic.neighbours.words`` go to
the record's ``outputs``. The vectors are written in word2vec's text format (gensim's
``save_word2vec_format``: "V D" then "word v_1 .. v_D" lines, the most frequent words first, the
special tokens left out), which ``gensim.models.KeyedVectors.load_word2vec_format`` reads, to
``<run dir>/model/vectors.txt`` (``model.binary=true``: word2vec's binary format,
``vectors.bin``), beside the vocabulary with its counts.
"""

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from datamodules.files import atomic_path
from datamodules.words import SPECIALS, WordVocabulary
from lit_models.core.module import PlmModule
from lit_models.metrics.word_vectors import (
    analogy_predictions,
    nearest_neighbours,
    similarity_scores,
)

VECTORS_FILE = "vectors.txt"
BINARY_VECTORS_FILE = "vectors.bin"


class LitWordVectors(PlmModule):
    """Subclasses train and give ``vectors()`` [V, D], row i the vector of vocabulary word i."""

    def __init__(self, vocab: WordVocabulary, intrinsic: Mapping, eval_splits: list[str],
                 set_kinds: Mapping[str, str], set_sizes: Mapping[str, int],
                 optim: Mapping) -> None:
        super().__init__(optim, num_layers=0)
        self.vocab = vocab
        self.intrinsic = dict(intrinsic)
        self.eval_splits = list(eval_splits)
        self.set_kinds, self.set_sizes = dict(set_kinds), dict(set_sizes)
        self.collected: list[list[tuple[torch.Tensor, ...]]] = [[] for _ in eval_splits]

    def vectors(self) -> torch.Tensor:
        raise NotImplementedError

    @property
    def restrict(self) -> int:
        return self.intrinsic.get("restrict_vocab") or len(self.vocab)

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        ids = batch["input_ids"]
        vectors = self.vectors().to(ids.device)
        if self.set_kinds[self.eval_splits[dataloader_idx]] == "similarity":
            normed = torch.nn.functional.normalize(vectors[ids].float(), dim=-1)
            cosines = (normed[:, 0] * normed[:, 1]).sum(-1)
            self.collected[dataloader_idx].append((cosines.cpu(), batch["labels"].cpu()))
        else:  # among the words only: rows of the special tokens are no candidates
            a, b, c, d = (ids - len(SPECIALS)).unbind(-1)
            predicted = analogy_predictions(vectors[len(SPECIALS):], a, b, c,
                                            self.restrict - len(SPECIALS))
            self.collected[dataloader_idx].append(((predicted == d).cpu(),))

    def on_validation_epoch_end(self) -> None:
        collected, self.collected = self.collected, [[] for _ in self.eval_splits]
        if self.trainer.sanity_checking:
            return
        for split, batches in zip(self.eval_splits, collected, strict=True):
            batches = self.gather_batches(batches)  # every process's, in order
            size = self.set_sizes[split]
            if self.set_kinds[split] == "similarity":
                model = torch.cat([b[0] for b in batches]).tolist() if batches else []
                human = torch.cat([b[1] for b in batches]).tolist() if batches else []
                self.record_metrics(split, similarity_scores(model, human, size))
            else:
                correct = torch.cat([b[0] for b in batches]) if batches else torch.zeros(0)
                known = len(correct)
                self.record_metrics(split, {
                    "accuracy": float(correct.float().mean()) if known else float("nan"),
                    "oov": 1 - known / size if size else 0.0})
        self.outputs["neighbours"] = self.neighbours()

    def neighbours(self) -> dict[str, list[tuple[str, float]]]:
        """Each query word's nearest neighbours (cosine), among the ``restrict`` most frequent
        words; query words outside the vocabulary are left out."""
        spec = self.intrinsic.get("neighbours") or {}
        words = [w for w in spec.get("words") or [] if w in self.vocab.index]
        if not words:
            return {}
        base = len(SPECIALS)  # the special tokens' rows are no candidates
        queries = torch.tensor([self.vocab.index[w] - base for w in words])
        ids, cosines = nearest_neighbours(self.vectors().cpu()[base:], queries,
                                          spec.get("k", 10), self.restrict - base)
        return {word: [(self.vocab.words[base + i], round(c, 4))
                       for i, c in zip(row, cos, strict=True)]
                for word, row, cos in zip(words, ids.tolist(), cosines.tolist(), strict=True)}


def save_vectors(vocab: WordVocabulary, vectors: torch.Tensor, directory: Path,
                 binary: bool = False) -> Path:
    """The vectors of every vocabulary word but the special tokens, in word2vec's format (text,
    or with ``binary`` its binary format), written by gensim, and the vocabulary beside them."""
    from gensim.models import KeyedVectors

    words = vocab.words[len(SPECIALS):]
    keyed = KeyedVectors(vector_size=vectors.shape[1], dtype=np.float32)
    keyed.add_vectors(words, vectors[len(SPECIALS):].float().cpu().numpy())
    keyed.allocate_vecattrs(attrs=["count"], types=[np.int64])  # the frequency order, kept
    keyed.expandos["count"][:] = vocab.counts[len(SPECIALS):]
    path = directory / (BINARY_VECTORS_FILE if binary else VECTORS_FILE)
    with atomic_path(path) as partial:
        keyed.save_word2vec_format(str(partial), binary=binary)
    vocab.save(directory)
    return path
