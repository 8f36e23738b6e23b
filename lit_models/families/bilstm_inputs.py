"""The input layers of the BiLSTM baselines: word features from static vectors, from ELMo, or from
any plmbench encoder's frozen layers, concatenated word by word (``datamodules/word_inputs.py``
aligns them). A BiLSTM preset's ``inputs`` names them:

- ``vectors``: ``learned`` (embeddings of ``embedding_dim`` trained with the task, initialised
  N(0, 1)), or pretrained vectors, frozen (GLUE-baselines' ``--train_words 0``): ``ckpt:<run dir>``
  of a word-vectors run (``<run dir>/model/vectors.txt``), or a word2vec text / binary file or a
  GloVe text file (no header line), e.g. glove.840B.300d.txt as the GLUE paper used. A task word
  without a vector gets a random one of the vectors' scale (frozen too); null: no word vectors.
- ``elmo``: ``ckpt:<run dir>`` of an ELMo biLM run: its L + 1 layers (each 2 x 512 in the
  original) mixed by a learned scalar mix (Peters et al. 2018, eq. 1; ``lit_models/core/
  features.py``) with dropout ``elmo_dropout`` on the mix (AllenNLP's ``Elmo``: 0.5).
- ``encoder``: ``hf:<dir>`` or ``ckpt:<run dir>`` of any registered encoder, frozen: the states of
  ``encoder_layers`` combined by ``encoder_combine`` (last | sum | concat | mix; BERT's Table 7),
  each word read at its first sub-word.

ELMo's and an encoder's states are frozen: each sentence's are computed once and kept
(``lit_models/core/feature_cache.py``), at most ``feature_cache_mb`` MiB per input (0: computed in
every step, as before).

The vocabulary of word vectors is the task's training words, the ``max_vocab`` most frequent
(GLUE baselines: 30,000), lowercased with ``lowercase``.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from datamodules.word_inputs import WordInputs
from datamodules.words import SPECIALS, WordVocabulary
from lit_models.core.feature_cache import FeatureCache
from lit_models.core.features import LayerFeatures, hidden_states
from lit_models.core.word_vectors import BINARY_VECTORS_FILE, VECTORS_FILE
from lit_models.families.bilm import load_elmo
from lit_models.interop.hf import from_hf

LEARNED = "learned"


def vectors_file(spec: str) -> Path:
    """The word2vec-format file ``inputs.vectors`` names (a run's export, or a path)."""
    if spec.startswith("ckpt:"):
        directory = InitFrom.parse(spec, "inputs.vectors").directory("inputs.vectors")
        found = [directory / name for name in (VECTORS_FILE, BINARY_VECTORS_FILE)
                 if (directory / name).is_file()]
        if not found:
            raise PlmbenchError(f"inputs.vectors={spec}: no {VECTORS_FILE} in {directory}; point "
                                "at a word-vectors run (task=embeddings/*)")
        return found[0]
    path = Path(spec).expanduser()
    if not path.is_file():
        raise PlmbenchError(f"inputs.vectors={spec}: no such file; give ckpt:<word-vectors run>, "
                            "a word2vec/GloVe vectors file, learned or null")
    return path


def read_vectors(path: Path):
    """gensim's KeyedVectors of a word2vec text/binary file, or of a headerless GloVe file."""
    from gensim.models import KeyedVectors

    binary = path.suffix == ".bin"
    try:
        return KeyedVectors.load_word2vec_format(str(path), binary=binary)
    except ValueError:  # GloVe's own text format has no "V D" first line
        return KeyedVectors.load_word2vec_format(str(path), binary=False, no_header=True)


def vector_table(vocab: WordVocabulary, keyed, seed: int) -> tuple[torch.Tensor, int]:
    """[V, D] rows of ``vocab`` from ``keyed`` (the word as written, else lowercased), random
    rows of the vectors' scale for the others (zero for padding); and how many were found."""
    vectors = keyed.vectors
    rng = np.random.default_rng(seed)
    table = rng.normal(0.0, float(vectors.std()), (len(vocab), vectors.shape[1]))
    found = 0
    for index, word in enumerate(vocab.words):
        key = word if word in keyed.key_to_index else word.lower()
        if index >= len(SPECIALS) and key in keyed.key_to_index:
            table[index] = vectors[keyed.key_to_index[key]]
            found += 1
    table[vocab.pad] = 0.0
    return torch.tensor(table, dtype=torch.float32), found


class WordVectorsInput(nn.Module):
    def __init__(self, table: torch.Tensor, trainable: bool) -> None:
        super().__init__()
        self.embedding = nn.Embedding.from_pretrained(table, freeze=not trainable)
        self.output_dim = table.shape[1]

    def forward(self, batch: Mapping[str, torch.Tensor], suffix: str) -> torch.Tensor:
        return self.embedding(batch[f"vocab_ids{suffix}"])


class ElmoInput(nn.Module):
    """ELMo's scalar-mixed layers of each word (the biLM reads <S> and </S> around it)."""

    def __init__(self, encoder: nn.Module, dropout: float, cache: FeatureCache | None = None
                 ) -> None:
        super().__init__()
        config = encoder.config
        self.features = LayerFeatures(encoder, config.num_layers + 1, config.output_dim,
                                      range(config.num_layers + 1), "mix", cache)
        self.dropout = nn.Dropout(dropout)
        self.output_dim = self.features.output_dim

    def forward(self, batch: Mapping[str, torch.Tensor], suffix: str) -> torch.Tensor:
        chars = batch[f"char_ids{suffix}"]
        mask = chars.any(dim=-1)
        mixed = self.features({"char_ids": chars, "mask": mask}, mask)
        return self.dropout(mixed[:, 1:-1])  # without <S> and </S>


class EncoderInput(nn.Module):
    """A frozen encoder's combined layers at each word's first sub-word."""

    def __init__(self, encoder: nn.Module, pad_id: int, layers: Sequence[int],
                 combine: str, cache: FeatureCache | None = None) -> None:
        super().__init__()
        with torch.no_grad():  # how many states, how wide: one probe forward
            probe = hidden_states(encoder.eval(), {"input_ids": torch.tensor([[pad_id]])})
        self.features = LayerFeatures(encoder, probe.shape[0], probe.shape[-1], layers, combine,
                                      cache)
        self.output_dim = self.features.output_dim

    def forward(self, batch: Mapping[str, torch.Tensor], suffix: str) -> torch.Tensor:
        mask = batch[f"subword_mask{suffix}"]
        states = self.features({"input_ids": batch[f"subword_ids{suffix}"],
                                "attention_mask": mask}, mask.bool())
        first = batch[f"first_subword{suffix}"]
        return states.gather(1, first[..., None].expand(-1, -1, states.shape[-1]))


def build_inputs(inputs: Mapping, training_words: list[list[str]], max_words: int, seed: int
                 ) -> tuple[nn.ModuleList, WordInputs, list[str], str]:
    """(the input layers, what the data must give them, the checkpoints they were pretrained
    as, a line saying what they are) from a preset's ``inputs``."""
    layers, sources, notes = [], [], []
    vocab = subwords = None
    cache_bytes = int(inputs.get("feature_cache_mb", 0) * 2**20)

    def cache() -> FeatureCache | None:
        return FeatureCache(cache_bytes) if cache_bytes > 0 else None

    spec = inputs.get("vectors")
    if spec is not None:
        vocab = WordVocabulary.count(training_words, inputs["max_vocab"], 1, inputs["lowercase"])
        if spec == LEARNED:
            table = torch.randn(len(vocab), inputs["embedding_dim"], generator=torch.Generator(
                ).manual_seed(seed))
            layers.append(WordVectorsInput(table, trainable=True))
            notes.append(f"{len(vocab)} learned word embeddings")
        else:
            path = vectors_file(spec)
            table, found = vector_table(vocab, read_vectors(path), seed)
            layers.append(WordVectorsInput(table, trainable=inputs["train_vectors"]))
            sources.append(spec if spec.startswith("ckpt:") else f"file:{path}")
            notes.append(f"{path}: vectors for {found} of {len(vocab) - len(SPECIALS)} words")
    if inputs.get("elmo") is not None:
        elmo, _ = load_elmo(inputs["elmo"])
        layers.append(ElmoInput(elmo.encoder, inputs["elmo_dropout"], cache()))
        sources.append(inputs["elmo"])
        notes.append(f"ELMo from {inputs['elmo']}")
    if inputs.get("encoder") is not None:
        where = InitFrom.parse(inputs["encoder"], "inputs.encoder", pretrained=True)
        _, encoder, subwords = from_hf(where.directory("inputs.encoder"))
        layers.append(EncoderInput(encoder, subwords.special.pad, inputs["encoder_layers"],
                                   inputs["encoder_combine"], cache()))
        sources.append(inputs["encoder"])
        notes.append(f"frozen {type(encoder).__name__} layers {list(inputs['encoder_layers'])} "
                     f"({inputs['encoder_combine']})")
    if not layers:
        raise PlmbenchError("a BiLSTM needs an input: set model.inputs.vectors (learned, "
                            "ckpt:<word-vectors run> or a vectors file), inputs.elmo or "
                            "inputs.encoder")
    word_inputs = WordInputs(vocab, chars=inputs.get("elmo") is not None, subwords=subwords,
                             subword_length=inputs.get("encoder_max_length", 512),
                             max_words=max_words)
    return nn.ModuleList(layers), word_inputs, sources, "; ".join(notes)
