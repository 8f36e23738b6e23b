"""GloVe (Pennington et al. 2014), trained in torch: the weighted least squares of eq. 8 over the
corpus's co-occurrence counts (``lit_models/nets/glove.py``; counts from
``datamodules/cooccurrence.py``), minibatches of non-zero entries in a new random order every
epoch, AdaGrad (§4.2: initial rate ``optim.lr`` 0.05) and no gradient clipping, as ``glove.c``.

AdaGrad is torch's (``optim=adagrad``), accumulators starting at 1 as ``glove.c``'s, over the
embeddings' sparse gradients, so a step costs the batch's rows, not the vocabulary's. Two
differences from ``glove.c``, which updates after every entry, lock-free from many threads: a
batch sums its entries' gradients per row (a row met twice gets one step of both), and torch adds
g^2 to the accumulator before the step, ``glove.c`` after it. The vectors evaluated and written
are W + W~.
"""

from collections.abc import Mapping

import torch

from datamodules.errors import PlmbenchError
from datamodules.words import WordVocabulary
from lit_models.core.word_vectors import LitWordVectors
from lit_models.nets.glove import Glove, GloveConfig


def build_glove(model: Mapping, vocab: WordVocabulary) -> Glove:
    return Glove(GloveConfig(vocab_size=len(vocab), vector_size=model["vector_size"],
                             x_max=model["x_max"], alpha=model["alpha"], pad_token_id=vocab.pad))


class LitGlove(LitWordVectors):
    examples = "cooccurrences"

    def __init__(self, net: Glove, vocab: WordVocabulary, intrinsic, eval_splits, set_kinds,
                 set_sizes, optim: Mapping) -> None:
        super().__init__(vocab, intrinsic, eval_splits, set_kinds, set_sizes, optim)
        self.net = net

    def vectors(self) -> torch.Tensor:
        return self.net.vectors()

    def training_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.net.loss(batch["input_ids"], batch["context_ids"], batch["counts"])
        self.log("train/loss", loss / len(batch["counts"]), prog_bar=True)  # per entry
        return loss

    def configure_optimizers(self) -> dict:
        """AdaGrad (§4.2; the embeddings task picks ``optim=adagrad``): another optimizer is
        refused (AdamW takes no sparse gradients)."""
        if self.optim_cfg.get("name") != "adagrad":
            raise PlmbenchError(f"GloVe trains with AdaGrad (Pennington et al. 2014, §4.2), not "
                                f"optim.name={self.optim_cfg.get('name')}; use optim=adagrad")
        return super().configure_optimizers()

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None,
                                    gradient_clip_algorithm=None) -> None:
        """No clipping (``glove.c`` has none), whatever the trainer preset says: the embeddings'
        gradients are sparse."""
