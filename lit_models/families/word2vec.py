"""word2vec (Mikolov et al. 2013, "Distributed Representations of Words and Phrases and their
Compositionality"): skip-gram or CBOW with negative sampling (k = ``negative`` noise words drawn
from the unigram distribution to the 3/4 power) and subsampling of frequent words (``sample``),
trained by gensim's ``Word2Vec`` (its optimised C routines: we do not rewrite them).

The run's Lightning loop feeds gensim: every batch of sentences (word ids of the run's
``WordVocabulary``, the out-of-vocabulary words dropped) is one ``Word2Vec.train`` call over those
sentences, with the learning rate decayed linearly from ``alpha`` to ``min_alpha`` over all the
run's steps (gensim's own schedule, cut into the steps). gensim's vocabulary is ours (same words,
same counts, same order), so row i of its vectors is word i + 4 of ours (after the special
tokens). Its arrays are this module's (untrained by torch) parameters, sharing memory with it, so
checkpoints hold and restore them. gensim trains on CPU threads (``workers``); with one worker
and the run's seed a run is reproducible (gensim's per-word initial vectors are seeded with a
stable hash, not Python's salted one).
"""

import logging
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from datamodules.errors import PlmbenchError
from datamodules.words import SPECIALS, WordVocabulary
from lit_models.core.word_vectors import LitWordVectors


@dataclass
class Word2VecConfig:
    """gensim's ``Word2Vec`` arguments (its defaults are Mikolov et al.'s code's)."""

    vocab_size: int = 0  # words (set from the vocabulary)
    vector_size: int = 300
    sg: bool = True  # skip-gram; false: CBOW
    window: int = 5  # context words on each side (sampled shorter per word, as word2vec.c)
    negative: int = 5  # noise words per positive (negative sampling)
    ns_exponent: float = 0.75  # the noise distribution: unigram counts ^ 3/4
    sample: float = 1e-3  # subsampling threshold of frequent words
    alpha: float = 0.025  # initial learning rate (CBOW: 0.05 in word2vec.c)
    min_alpha: float = 1e-4  # final learning rate
    cbow_mean: bool = True  # CBOW averages its context vectors
    workers: int = 1  # gensim's training threads
    pad_token_id: int = 0


def stable_hash(text: str) -> int:
    """gensim seeds each word's initial vector with hash(word + seed): this one is the same in
    every process (Python's ``hash`` of a string is salted per process)."""
    return zlib.crc32(text.encode("utf-8"))


class GensimWord2Vec(nn.Module):
    """A gensim ``Word2Vec`` over a plmbench vocabulary; ``vectors`` / ``output`` are its input
    vectors and negative-sampling output vectors (shared memory)."""

    def __init__(self, config: Word2VecConfig, vocab: WordVocabulary, seed: int) -> None:
        super().__init__()
        from gensim.models import Word2Vec

        self.config = config
        c = config
        self.model = Word2Vec(vector_size=c.vector_size, sg=int(c.sg), window=c.window, hs=0,
                              negative=c.negative, ns_exponent=c.ns_exponent, sample=c.sample,
                              alpha=c.alpha, min_alpha=c.min_alpha, cbow_mean=int(c.cbow_mean),
                              workers=c.workers, min_count=1, seed=seed, hashfxn=stable_hash,
                              sorted_vocab=0)  # ours is already sorted (its ties kept)
        words = vocab.words[len(SPECIALS):]
        counts = vocab.counts[len(SPECIALS):].tolist()
        if not words:
            raise PlmbenchError("word2vec: the vocabulary holds no word; give the corpus more "
                                "text or lower model.min_count")
        self.model.build_vocab_from_freq(dict(zip(words, counts, strict=True)))
        if list(self.model.wv.index_to_key) != words:
            raise RuntimeError("gensim ordered the vocabulary differently from ours")
        self.vectors = nn.Parameter(torch.from_numpy(self.model.wv.vectors), requires_grad=False)
        self.output = nn.Parameter(torch.from_numpy(self.model.syn1neg), requires_grad=False)
        self.words = words


def build_word2vec(model: Mapping, vocab: WordVocabulary, seed: int) -> GensimWord2Vec:
    fields = {k: model[k] for k in Word2VecConfig.__dataclass_fields__ if k in model}
    config = Word2VecConfig(**{**fields, "vocab_size": len(vocab) - len(SPECIALS)})
    return GensimWord2Vec(config, vocab, seed)


class LitWord2Vec(LitWordVectors):
    examples = "sentences"

    def __init__(self, net: GensimWord2Vec, vocab: WordVocabulary, intrinsic, eval_splits,
                 set_kinds, set_sizes, optim: Mapping) -> None:
        super().__init__(vocab, intrinsic, eval_splits, set_kinds, set_sizes, optim)
        self.net = net

    def vectors(self) -> torch.Tensor:
        """gensim's input vectors under zero rows for the special tokens."""
        zeros = self.net.vectors.new_zeros(len(SPECIALS), self.net.vectors.shape[1])
        return torch.cat([zeros, self.net.vectors])

    def alpha_at(self, step: int) -> float:
        c = self.net.config
        total = max(1, int(self.trainer.estimated_stepping_batches))
        return c.alpha - (c.alpha - c.min_alpha) * min(1.0, step / total)

    def training_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        """One gensim ``train`` call; what Lightning gets back is a constant it steps a
        placeholder optimizer with (so steps count, schedules and clipping settings apply
        harmlessly): gensim has already updated the vectors."""
        words, base = self.net.words, len(SPECIALS)
        sentences = [[words[i - base] for i in row if i >= base]
                     for row in batch["input_ids"].tolist()]
        step = self.global_step
        gensim_log = logging.getLogger("gensim")
        level = gensim_log.level
        gensim_log.setLevel(logging.ERROR)  # per-call progress lines and small-job advice
        try:
            self.net.model.train(sentences, total_examples=len(sentences), epochs=1,
                                 start_alpha=self.alpha_at(step),
                                 end_alpha=self.alpha_at(step + 1))
        finally:
            gensim_log.setLevel(level)
        return torch.zeros((), requires_grad=True)

    def configure_optimizers(self):
        """An optimizer of nothing (a placeholder scalar, never given a gradient): torch trains
        no parameter of word2vec, and Lightning counts steps by optimizer steps."""
        return torch.optim.SGD([nn.Parameter(torch.zeros(()))], lr=0.0)
