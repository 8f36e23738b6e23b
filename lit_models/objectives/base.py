"""What a pretraining objective supplies (DESIGN.md contract 2): a corruption step that runs in the
DataLoader's collate and a loss computed in the training step.

An objective is a configured object (``conf/objective/<name>.yaml`` names its class with
``_target_``), so ``LitPretrain`` and the pretraining family name no objective: adding one (SOP,
span masking, replaced-token detection, span corruption ...) is a class here and a YAML.
"""

import math
import random
from collections.abc import Callable, Mapping

from torch import Tensor, nn
from torch.utils.data import get_worker_info

from datamodules.tokenization import TextTokenizer
from lit_models.objectives.flops import EncoderShape

#: documents -> sentences -> token ids (no special tokens), what example builders take
Documents = list[list[list[int]]]


class PretrainingObjective:
    """Base class; ``LitPretrain`` calls ``losses`` to train and ``evaluate`` per eval batch."""

    #: the eval metrics ``evaluate`` returns, accumulated as weighted means per eval split
    eval_metrics: tuple[str, ...] = ()
    #: passes of ``make_examples`` over the training documents (static masking: dupe_factor)
    copies: int = 1
    #: whether training examples carry a fixed corruption seed (``mask_seed``)
    seeded: bool = False
    #: whether the examples can be packed into rows (``task.packing``, datamodules/packing.py):
    #: ``make_examples`` then takes the ``PackingConfig`` and ``collator`` reads packed rows
    packable: bool = False
    #: whether ``make_examples`` takes documents as sentence strings instead of token ids
    #: (salient span masking finds its spans in the text)
    reads_text: bool = False

    def check(self, net: nn.Module, tokenizer: TextTokenizer) -> None:
        """Raise ``PlmbenchError`` if ``net`` lacks a head or ``tokenizer`` a token it needs."""

    def make_examples(self, max_length: int, tokenizer: TextTokenizer
                      ) -> Callable[..., list[dict]]:
        """``(documents, rng=random.Random) -> examples`` of at most ``max_length`` tokens (a
        ``packable`` objective also takes ``packing``, a ``PackingConfig``)."""
        raise NotImplementedError

    def collator(self, tokenizer: TextTokenizer, seed: int) -> Callable[[list[dict]], dict]:
        """The DataLoader's ``collate_fn``: pads and corrupts a list of examples."""
        raise NotImplementedError

    def losses(self, net: nn.Module, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The training losses of a batch; their sum is minimised."""
        raise NotImplementedError

    def evaluate(self, net: nn.Module, batch: Mapping[str, Tensor]
                 ) -> dict[str, tuple[Tensor, Tensor]]:
        """``eval_metrics`` of a batch as (value, weight) pairs, e.g. (mean loss, #predicted)."""
        raise NotImplementedError

    def summarize(self, means: Mapping[str, float]) -> dict[str, float]:
        """The recorded eval metrics from the split's weighted means (e.g. add perplexity)."""
        return dict(means)

    def flops(self, shape: EncoderShape, batch: Mapping[str, Tensor]) -> Tensor | float | None:
        """Model FLOPs of one training step on ``batch``, where the objective can count them
        (a device tensor where they depend on the batch's content: no host synchronisation)."""
        return None


def special_ids(tokenizer: TextTokenizer) -> set[int]:
    """Ids no corruption may draw as a random token: the special tokens by role and every token
    the tokenizer added as special (T5's sentinels, ...)."""
    added = tokenizer.backend.get_added_tokens_decoder().items()
    return tokenizer.special.ids | {i for i, token in added if token.special}


def perplexity(loss: float) -> float:
    """exp(mean negative log-likelihood per predicted token), inf where that overflows."""
    return math.exp(loss) if loss < 700 else math.inf




class ExampleRandomness:
    """For collates that corrupt example by example with ``random``: an example's own generator
    when it carries a ``mask_seed`` (eval examples: the same corruption every time), else this
    process's, seeded once (each DataLoader worker, recognised by its seed, makes its own)."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._rng: random.Random | None = None
        self._owner: int | None = None

    def rng(self, example: Mapping) -> random.Random:
        if example.get("mask_seed") is not None:
            return random.Random(example["mask_seed"])
        worker = get_worker_info()
        owner = None if worker is None else worker.seed
        if self._rng is None or owner != self._owner:
            self._rng = random.Random(self.seed if worker is None else self.seed + worker.seed)
            self._owner = owner
        return self._rng
