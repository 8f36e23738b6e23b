"""The GLUE baselines' BiLSTM task models (Wang et al. 2019, "GLUE", §5; ``nyu-mll/GLUE-baselines``
``src/models.py``), over word features from any input layer (static vectors, ELMo, a frozen
encoder's layers: ``lit_models/core/features.py``).

- Sentence encoder: optional highway layers over the word features, dropout, a bidirectional
  LSTM (the paper: two layers of 1500 units per direction), dropout, max pooling over the words.
- Single-sentence tasks classify the sentence vector; pairs encode each sentence separately and
  classify [u; v; |u - v|; u * v] (Conneau et al. 2017's features).
- With ``attention`` (the paper's "+Attn", after Seo et al. 2017's BiDAF), pairs are encoded
  jointly: after the sentence BiLSTM, each word of one sentence attends to the other's words by
  the dot product of their states (softmax over the other's words), its state and the attended
  vector are concatenated, dropped out and read by a second, one-layer BiLSTM of the same width,
  whose max-pooled outputs u, v give [u; v; |u - v|; u * v].
- The classifier is an MLP with one 512-unit tanh layer (dropout before each linear layer); a
  regression task (STS-B) reads the features with one linear layer (the code's ``log_reg``).
- The tagger (for NER) scores each word's BiLSTM state with a linear layer.
"""

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from lit_models.nets.char_cnn import Highway


@dataclass
class BiLSTMConfig:
    """Defaults are the GLUE paper's (``final_exps.sh``: -h 1500 -L 2 -H 0 -D 0.2, MLP 512)."""

    input_dim: int = 300  # the word features' width (300: GloVe 840B)
    hidden_size: int = 1500  # per direction
    num_layers: int = 2
    num_highway: int = 0  # highway layers over the word features
    dropout: float = 0.2
    pairs: bool = False  # sentence pairs (two inputs) rather than single sentences
    attention: bool = False  # pairs: BiDAF-style attention and a modelling BiLSTM
    classifier_hidden: int = 512
    classifier_dropout: float = 0.0  # GLUE-baselines' --classifier_dropout default
    num_labels: int = 2  # 1: regression (a linear layer)

    @property
    def num_hidden_layers(self) -> int:
        """The BiLSTM's layers, by the name the task modules read (layer-wise lr decay)."""
        return self.num_layers


def max_pool(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, T, D] -> [B, D], the maximum over the words where ``mask`` [B, T] is True."""
    return states.masked_fill(~mask[..., None], float("-inf")).amax(dim=1)


class BiLSTM(nn.Module):
    """A bidirectional LSTM over padded sequences (packed, so the backward direction starts at
    each row's last word)."""

    def __init__(self, input_dim: int, hidden_size: int, num_layers: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_dim, hidden_size, num_layers, batch_first=True,
                            bidirectional=True)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        lengths = mask.sum(dim=1).clamp(min=1).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0]


class SentenceEncoder(nn.Module):
    """Word features [B, T, input_dim] -> contextual states [B, T, 2 x hidden_size]."""

    def __init__(self, config: BiLSTMConfig) -> None:
        super().__init__()
        self.highways = nn.ModuleList(Highway(config.input_dim)
                                      for _ in range(config.num_highway))
        self.lstm = BiLSTM(config.input_dim, config.hidden_size, config.num_layers)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for highway in self.highways:
            features = highway(features)
        return self.dropout(self.lstm(self.dropout(features), mask))


def attend(query: torch.Tensor, keys: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
    """Each query word's softmax(dot products)-weighted sum of ``keys`` (padding excluded)."""
    scores = query @ keys.transpose(1, 2)
    scores = scores.masked_fill(~key_mask[:, None, :], float("-inf"))
    return torch.softmax(scores, dim=-1) @ keys


class BiLSTMClassifier(nn.Module):
    """Sentence (pair) classification or regression from word features."""

    def __init__(self, config: BiLSTMConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = SentenceEncoder(config)
        c = config
        width = 2 * c.hidden_size
        if c.pairs and c.attention:
            self.modeling = BiLSTM(2 * width, c.hidden_size, 1)
        self.dropout = nn.Dropout(c.dropout)
        width *= 4 if c.pairs else 1
        if c.num_labels == 1:
            self.classifier = nn.Linear(width, 1)
        else:
            self.classifier = nn.Sequential(
                nn.Dropout(c.classifier_dropout), nn.Linear(width, c.classifier_hidden), nn.Tanh(),
                nn.Dropout(c.classifier_dropout), nn.Linear(c.classifier_hidden, c.num_labels))

    def forward(self, features: torch.Tensor, mask: torch.Tensor,
                features_b: torch.Tensor | None = None,
                mask_b: torch.Tensor | None = None) -> torch.Tensor:
        """Label scores [B, num_labels] of sentences, or of pairs with the ``_b`` inputs."""
        if (features_b is not None) != self.config.pairs:
            raise ValueError(f"a classifier of {'pairs' if self.config.pairs else 'sentences'} "
                             f"got {'two inputs' if features_b is not None else 'one input'}")
        states = self.encoder(features, mask)
        if features_b is None:
            return self.classifier(max_pool(states, mask))
        states_b = self.encoder(features_b, mask_b)
        if self.config.attention:
            with_context = self.dropout(torch.cat([states, attend(states, states_b, mask_b)], -1))
            with_context_b = self.dropout(torch.cat([states_b, attend(states_b, states, mask)], -1))
            states = self.dropout(self.modeling(with_context, mask))
            states_b = self.dropout(self.modeling(with_context_b, mask_b))
        u, v = max_pool(states, mask), max_pool(states_b, mask_b)
        return self.classifier(torch.cat([u, v, (u - v).abs(), u * v], dim=-1))


class BiLSTMTagger(nn.Module):
    """A tag score per word: the sentence BiLSTM's states through a linear layer."""

    def __init__(self, config: BiLSTMConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = SentenceEncoder(config)
        self.classifier = nn.Linear(2 * config.hidden_size, config.num_labels)

    def forward(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.encoder(features, mask))
