"""ELMo's bidirectional language model (Peters et al. 2018, "Deep contextualized word
representations", §3.1 and §3.4).

A character CNN (``char_cnn.py``) gives each word a context-free representation x_k; a forward
LSTM stack reads the sentence left to right and predicts the next word, a backward stack right to
left and predicts the previous one (eq. in §3.1: the sum of both log likelihoods, jointly
maximised). The two directions share the token representation Theta_x and the softmax Theta_s,
and have LSTMs of their own. The released "original" model (§3.4): 2 layers of 4096-dimensional
LSTM cells with 512-dimensional projections, clipped at 3 (``lstm.py``), a residual connection
from the first layer to the second, 2048 character filters, 2 highway layers, 512-dimensional
token projection; 93.6M parameters without the softmax (AllenNLP's model table; tested).

``ElmoEncoder`` is the biLM without its softmax, what downstream models read: L + 1 = 3 layers
per token, the token layer [x_k; x_k] and each LSTM layer [h_fwd; h_bwd], each 2 x 512 (§3.2),
mixed by a task's ``ScalarMix`` (``scalar_mix.py``). Inputs carry <S> and </S> around each
sentence (``datamodules/characters.py`` spells them); ``ElmoLanguageModel`` adds the softmax
over a word vocabulary and the two directions' losses.

The released biLM trained its softmax over the 1B Word Benchmark's 793,471 words as a sampled
softmax (Jozefowicz et al. 2016, §3.1; ``bilm-tf``: 8,192 noise words a batch): with
``softmax_samples`` S < V, a training step scores each target against S noise words drawn with
replacement from a log-uniform (Zipfian) distribution over the ids, which the vocabulary ranks by
frequency, Q(k) = log((k + 2) / (k + 1)) / log(V + 1), one draw for the whole batch; each noise
logit is corrected by -log(S Q(k)) (Jean et al. 2015, eq. 12: the importance weights, so that the
sampled normaliser exp(s_t) + sum_j exp(s_kj) / (S Q(kj)) is an unbiased estimate of the full
one), and a draw of the target itself is removed (TensorFlow's ``remove_accidental_hits``). The
cost of the softmax falls from V to S + 1 words per prediction. Evaluation (``eval()``) always
uses the full softmax, so a perplexity is the same either way.
"""

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from lit_models.nets.char_cnn import CharCNN
from lit_models.nets.lstm import ProjectedLSTM, reverse_padded

#: ELMo's character filters (width, count): 2048 in all (``bilm-tf``'s train_elmo.py)
ELMO_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


@dataclass
class ElmoConfig:
    """Defaults are the released "original" ELMo (5.5B and 1B Word Benchmark models alike)."""

    vocab_size: int = 793471  # the softmax's words (1B Word Benchmark's vocabulary)
    pad_token_id: int = 0
    num_characters: int = 262  # 256 bytes + 5 markers + word padding (characters.py)
    max_characters: int = 50  # characters per word, markers included
    char_embedding_dim: int = 16
    char_filters: tuple[tuple[int, int], ...] = field(default=ELMO_FILTERS)
    num_highway: int = 2
    projection_dim: int = 512  # token representation and LSTM projection
    cell_dim: int = 4096  # LSTM memory cells
    num_layers: int = 2
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    residual: bool = True  # the second layer adds its input to its output
    dropout: float = 0.1  # on every LSTM layer's input and on the softmax's input
    softmax_samples: int = 0  # noise words of a training step's sampled softmax (0, or >= the
    # vocabulary: the full softmax; bilm-tf: 8192)

    def __post_init__(self) -> None:
        self.char_filters = tuple(tuple(f) for f in self.char_filters)
        if self.num_layers < 1 or any(len(f) != 2 for f in self.char_filters):
            raise ValueError("ELMo needs at least one LSTM layer and (width, count) filters")

    @property
    def output_dim(self) -> int:
        """Width of each layer a downstream model reads: forward and backward concatenated."""
        return 2 * self.projection_dim


@dataclass
class ElmoOutput:
    layers: torch.Tensor  # [L + 1, B, T, 2 x projection_dim]: token layer, then each LSTM layer
    forward: torch.Tensor  # [B, T, projection_dim]: the forward stack's top layer
    backward: torch.Tensor  # [B, T, projection_dim]: the backward stack's, in sentence order

    @property
    def hidden_states(self) -> tuple[torch.Tensor, ...]:
        """The L + 1 layers, as a Transformer encoder returns its states (frozen features)."""
        return tuple(self.layers)


class ElmoEncoder(nn.Module):
    """Character ids [B, T, C] (0 = padding word) -> the biLM's layers."""

    def __init__(self, config: ElmoConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = CharCNN(config.num_characters, config.char_embedding_dim,
                                     config.char_filters, config.num_highway,
                                     config.projection_dim)
        self.forward_layers = self._stack()
        self.backward_layers = self._stack()
        self.dropout = nn.Dropout(config.dropout)

    def _stack(self) -> nn.ModuleList:
        c = self.config
        return nn.ModuleList(ProjectedLSTM(c.projection_dim, c.cell_dim, c.projection_dim,
                                           c.cell_clip, c.proj_clip) for _ in range(c.num_layers))

    def _direction(self, x: torch.Tensor, layers: nn.ModuleList) -> list[torch.Tensor]:
        outputs = []
        for index, lstm in enumerate(layers):
            h = lstm(self.dropout(x))
            if self.config.residual and index > 0:
                h = h + x
            outputs.append(h)
            x = h
        return outputs

    def forward(self, char_ids: torch.Tensor, mask: torch.Tensor | None = None,
                output_hidden_states: bool = True) -> ElmoOutput:
        """``mask`` [B, T], True at words (default: where any character id is non-zero); every
        layer is computed anyway, so ``output_hidden_states`` changes nothing."""
        if mask is None:
            mask = (char_ids > 0).any(dim=-1)
        lengths = mask.sum(dim=1)
        tokens = self.token_encoder(char_ids, mask)  # zero at padding
        forward = self._direction(tokens, self.forward_layers)
        backward = [reverse_padded(h, lengths) for h in
                    self._direction(reverse_padded(tokens, lengths), self.backward_layers)]
        layers = [torch.cat([tokens, tokens], dim=-1)]
        layers += [torch.cat([f, b], dim=-1) for f, b in zip(forward, backward, strict=True)]
        stacked = torch.stack(layers) * mask[None, ..., None]
        return ElmoOutput(stacked, forward[-1], backward[-1])


class ElmoLanguageModel(nn.Module):
    """The biLM with its softmax over ``vocab_size`` words, shared by both directions."""

    def __init__(self, config: ElmoConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = ElmoEncoder(config)
        self.softmax = nn.Linear(config.projection_dim, config.vocab_size)

    def forward(self, char_ids: torch.Tensor, mask: torch.Tensor | None = None) -> ElmoOutput:
        return self.encoder(char_ids, mask)

    def losses(self, char_ids: torch.Tensor, word_ids: torch.Tensor,
               mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """Summed negative log likelihood of each direction and the number of predictions.

        Each row is "<S> w_1 .. w_n </S>" (``mask`` True on it): position k's forward state
        predicts word k + 1, its backward state word k - 1, so each direction makes n + 1
        predictions per sentence."""
        out = self.encoder(char_ids, mask)
        following = mask[:, 1:]  # a next word exists
        drop = self.encoder.dropout
        states = (drop(out.forward[:, :-1][following]), drop(out.backward[:, 1:][following]))
        targets = (word_ids[:, 1:][following], word_ids[:, :-1][following])
        nll = self.sampled_nll if self.sampled else self.full_nll
        forward, backward = (nll(h, t) for h, t in zip(states, targets, strict=True))
        return {"forward_nll": forward, "backward_nll": backward,
                "predictions": following.sum()}

    @property
    def sampled(self) -> bool:
        """Whether a step uses the sampled softmax: in training, with fewer noise words than the
        vocabulary has."""
        return self.training and 0 < self.config.softmax_samples < self.config.vocab_size

    def full_nll(self, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Summed negative log likelihood of ``targets`` [N] under the full softmax."""
        return F.cross_entropy(self.softmax(states), targets, reduction="sum")

    def noise(self, count: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """``count`` ids drawn with replacement from the log-uniform distribution, and log Q."""
        vocab = self.config.vocab_size
        log_range = math.log(vocab + 1)
        ids = (torch.rand(count, device=device) * log_range).exp().floor().long() - 1
        ids = ids.clamp(0, vocab - 1)
        log_q = torch.log(torch.log1p(1.0 / (ids + 1.0)) / log_range)
        return ids, log_q

    def sampled_nll(self, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Summed negative log likelihood of ``targets`` under the sampled softmax: each target
        against the batch's noise words, their logits corrected by -log(S Q)."""
        samples = self.config.softmax_samples
        ids, log_q = self.noise(samples, states.device)
        weight, bias = self.softmax.weight, self.softmax.bias
        true = (states * weight[targets]).sum(dim=-1) + bias[targets]
        noise = states @ weight[ids].T + bias[ids] - (math.log(samples) + log_q)
        noise = noise.masked_fill(ids[None, :] == targets[:, None], float("-inf"))
        logits = torch.cat([true[:, None], noise], dim=1)
        return -(logits[:, 0] - logits.logsumexp(dim=1)).sum()
