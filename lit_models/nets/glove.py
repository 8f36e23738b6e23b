"""GloVe's log-bilinear regression (Pennington et al. 2014, "GloVe: Global Vectors for Word
Representation", §3, eq. 8):

    J = sum_{i,j: X_ij > 0} f(X_ij) (w_i . w~_j + b_i + b~_j - log X_ij)^2,
    f(x) = (x / x_max)^alpha if x < x_max else 1      (x_max = 100, alpha = 3/4: §4.2)

over the non-zero co-occurrence counts X_ij (``datamodules/cooccurrence.py``), with word vectors
W, context vectors W~ and their biases. As the reference ``glove.c``: the loss is halved (its
cost 1/2 f(x) diff^2), every parameter starts uniform in [-0.5, 0.5) / d, and the vectors a user
reads are W + W~ (§4.2: "we choose to use the sum W + W~ as our word vectors"). The embeddings
give sparse gradients, so AdaGrad updates only the rows a batch touches.
"""

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class GloveConfig:
    vocab_size: int = 400000  # 6B-token corpus vocabulary (§4.2)
    vector_size: int = 300
    x_max: float = 100.0
    alpha: float = 0.75
    pad_token_id: int = 0


def weighting(x: torch.Tensor, x_max: float, alpha: float) -> torch.Tensor:
    """f(X_ij) (eq. 9)."""
    return torch.where(x < x_max, (x / x_max) ** alpha, torch.ones_like(x))


class Glove(nn.Module):
    def __init__(self, config: GloveConfig) -> None:
        super().__init__()
        self.config = config
        v, d = config.vocab_size, config.vector_size
        self.word = nn.Embedding(v, d, sparse=True)  # W
        self.context = nn.Embedding(v, d, sparse=True)  # W~
        self.word_bias = nn.Embedding(v, 1, sparse=True)  # b
        self.context_bias = nn.Embedding(v, 1, sparse=True)  # b~
        with torch.no_grad():
            for table in (self.word, self.context, self.word_bias, self.context_bias):
                table.weight.uniform_(-0.5 / d, 0.5 / d)

    def loss(self, rows: torch.Tensor, cols: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """1/2 sum f(X_ij) (w_i . w~_j + b_i + b~_j - log X_ij)^2 over a batch of entries."""
        c = self.config
        prediction = (self.word(rows) * self.context(cols)).sum(-1)
        prediction = prediction + self.word_bias(rows)[:, 0] + self.context_bias(cols)[:, 0]
        diff = prediction - torch.log(counts)
        return 0.5 * (weighting(counts, c.x_max, c.alpha) * diff**2).sum()

    def vectors(self) -> torch.Tensor:
        """W + W~: the word vectors GloVe writes (``glove.c -model 2``)."""
        return (self.word.weight + self.context.weight).detach()
