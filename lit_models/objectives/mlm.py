"""Masked language modelling: BERT's token corruption and a loss over the masked positions only.

Devlin et al. 2019 (BERT), §3.1 "Task #1: Masked LM" and Appendix A.1: per sequence, 15% of the
tokens are selected for prediction; a selected token becomes [MASK] 80% of the time, a random
token 10% of the time, and stays unchanged 10% of the time. Selection follows google-research/bert
create_pretraining_data.py: max(1, round(n * p)) of the n candidate tokens (never [CLS], [SEP],
[PAD], ...), chosen by random scores; with whole-word masking every WordPiece of a word is
selected together. Liu et al. 2019 (RoBERTa), §4.1: static masking (the data duplicated
``dupe_factor`` times, each copy masked once, the same mask every epoch) versus dynamic masking
(a new mask every time a sequence is fed to the model).

The corruption runs in the DataLoader's collate (``MLMCollator``); ``masked_lm_loss`` computes
vocabulary logits only at the masked positions (Design contract 2). ``MaskedLM`` is the objective
(``objective=mlm`` / ``mlm_nsp`` / ``mlm_sop``): BERT's MLM, with next sentence prediction or
ALBERT's sentence-order prediction (Lan et al. 2020, §3.1) as an option, and ALBERT's n-gram
masking (§4.1, ``max_ngram``, in ``ngram.py``).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import get_worker_info

from datamodules.collate import (
    IGNORE_INDEX,
    add_label_positions,
    at_positions,
    encoder_inputs,
    label_positions,
)
from datamodules.errors import PlmbenchError
from datamodules.packing import PackingConfig, collate_packed
from datamodules.tokenization import TextTokenizer
from lit_models.objectives.base import PretrainingObjective, perplexity, special_ids
from lit_models.objectives.flops import EncoderShape, mlm_training_flops
from lit_models.objectives.ngram import ngram_starts
from lit_models.objectives.nsp import LABEL_KEYS, make_segment_pairs, next_sentence_loss


@dataclass
class MaskingConfig:
    mlm_probability: float = 0.15  # share of non-special tokens selected per sequence
    mask_token_rate: float = 0.8  # of selected: -> [MASK]
    random_token_rate: float = 0.1  # of selected: -> random token; the rest unchanged
    whole_word: bool = False  # select whole words (every piece of a word with its first piece)
    max_ngram: int = 1  # > 1: n-grams of 1..N whole words, p(n) ~ 1/n (ALBERT: 3, ngram.py)
    static: bool = False  # fixed mask per example copy (RoBERTa's static baseline)
    dupe_factor: int = 10  # copies of the data for static masking, each masked differently

    def __post_init__(self) -> None:
        if not 0.0 < self.mlm_probability <= 1.0:
            raise PlmbenchError(
                f"mlm_probability={self.mlm_probability} must be in (0, 1]; BERT uses 0.15"
            )
        rates = (self.mask_token_rate, self.random_token_rate)
        if min(rates) < 0.0 or sum(rates) > 1.0:
            raise PlmbenchError(
                f"mask_token_rate={rates[0]} and random_token_rate={rates[1]} must be >= 0 with "
                "a sum <= 1; BERT uses 0.8 and 0.1"
            )
        if self.max_ngram < 1:
            raise PlmbenchError(f"max_ngram={self.max_ngram} must be >= 1; ALBERT uses 3")
        if self.dupe_factor < 1:
            raise PlmbenchError(f"dupe_factor={self.dupe_factor} must be >= 1; RoBERTa uses 10")


def _select_words(
    candidates: Tensor, budget: Tensor, word_starts: Tensor, generator: torch.Generator | None
) -> Tensor:
    """Per row, whole words in a random order, each taken if its pieces still fit the budget.

    This is create_pretraining_data's greedy rule (a word that would overflow is skipped, later
    ones are still tried), computed in passes over the whole batch: each pass takes, among the
    untaken words that fit the remaining budget, the longest ranked prefix that fits. A word is a
    candidate only if all its pieces are. With one token per word this selects exactly ``budget``
    tokens in one pass.
    """
    batch, length = candidates.shape
    # word index of every token: a continuation piece belongs to the word begun before it
    word_of_token = (word_starts.long().cumsum(1) - 1).clamp(min=0)
    zeros = torch.zeros(batch, length, dtype=torch.long, device=candidates.device)
    word_ok = zeros.scatter_reduce(
        1, word_of_token, candidates.long(), "amin", include_self=False
    ).bool()
    word_length = zeros.scatter_add(1, word_of_token, torch.ones_like(word_of_token))
    scores = torch.rand(batch, length, generator=generator, device=candidates.device)
    order = scores.argsort(dim=1)  # a random ranking of the word slots
    ranked_ok, ranked_length = word_ok.gather(1, order), word_length.gather(1, order)
    taken = torch.zeros_like(ranked_ok)
    remaining = budget.clone()
    while True:
        fits = ranked_ok & ~taken & (ranked_length <= remaining[:, None])
        if not fits.any():
            break
        tokens_so_far = (ranked_length * fits).cumsum(1)
        new = fits & (tokens_so_far <= remaining[:, None])
        taken |= new
        remaining -= (ranked_length * new).sum(1)
    word_taken = torch.zeros_like(taken).scatter(1, order, taken)
    return word_taken.gather(1, word_of_token) & candidates


def mask_tokens(
    input_ids: Tensor,
    special: Tensor,
    cfg: MaskingConfig,
    vocab_size: int,
    mask_id: int,
    generator: torch.Generator | None = None,
    word_starts: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Corrupt a batch for MLM; returns (corrupted ids, labels with IGNORE_INDEX where unselected).

    input_ids: [B, T] token ids (padding included). special: [vocab_size] bool, True for ids that
    are never selected nor drawn as random replacements ([PAD], [CLS], [SEP], [MASK], [UNK] ...).
    word_starts: [B, T] bool, True where a token begins a word; None: every token is a word.
    """
    if special.shape != (vocab_size,):
        raise PlmbenchError(
            f"special must be a bool tensor over the vocabulary of shape ({vocab_size},), got "
            f"{tuple(special.shape)}; mark special ids with special[id] = True"
        )
    candidates = ~special[input_ids]
    n_candidates = candidates.sum(1)
    budget = (n_candidates * cfg.mlm_probability).round().long().clamp(min=1)
    budget = budget.minimum(n_candidates)  # a row without candidates selects nothing
    if word_starts is None:
        word_starts = torch.ones_like(candidates)
    selected = _select_words(candidates, budget, word_starts, generator)
    # one uniform draw per token decides [MASK] / random / unchanged (BERT Appendix A.1)
    action = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    to_mask = selected & (action < cfg.mask_token_rate)
    to_random = selected & ~to_mask & (action < cfg.mask_token_rate + cfg.random_token_rate)
    replacements = (~special).nonzero().squeeze(1).to(input_ids.device)
    draws = torch.randint(
        len(replacements), input_ids.shape, generator=generator, device=input_ids.device
    )
    corrupted = torch.where(to_random, replacements[draws], input_ids)
    corrupted = corrupted.masked_fill(to_mask, mask_id)
    labels = input_ids.masked_fill(~selected, IGNORE_INDEX)
    return corrupted, labels


class MLMCollator:
    """DataLoader ``collate_fn``: pads a list of examples and masks them.

    Dynamic masking (default): a new mask on every call, from a generator seeded once per process
    (each DataLoader worker reseeds its copy, so workers draw different masks). Static masking:
    every example carries a ``mask_seed`` and is masked with a generator seeded by it, so a copy
    gets the same mask in every epoch and in any batch. Examples with a ``mask_seed`` are always
    masked statically (PretrainDataModule gives eval examples one, for a fixed eval mask).
    """

    def __init__(self, tokenizer: TextTokenizer, cfg: MaskingConfig, seed: int = 0) -> None:
        special = tokenizer.special
        if special.mask is None:
            raise PlmbenchError(
                "masked LM needs a mask token, and this tokenizer's config names none "
                "(mask_token in tokenizer_config.json); use a checkpoint with one"
            )
        vocab_size = tokenizer.vocab_size
        self.special = torch.zeros(vocab_size, dtype=torch.bool)
        self.special[sorted(special_ids(tokenizer))] = True
        self.pad_id, self.mask_id, self.vocab_size = special.pad, special.mask, vocab_size
        self.cfg = cfg
        # a token begins a word if its vocabulary entry does, or if it follows a special token
        whole_words = cfg.whole_word or cfg.max_ngram > 1
        self.word_start_ids = tokenizer.word_start_mask() if whole_words else None
        self.seed = seed
        self._generator: torch.Generator | None = None
        self._generator_owner: int | None = None  # worker seed of the process that made it

    def _dynamic_generator(self) -> torch.Generator:
        """This process's generator: the collator is copied into each worker, so a worker
        (recognised by its seed, which DataLoader derives from its own generator) makes its own."""
        worker = get_worker_info()
        owner = None if worker is None else worker.seed
        if self._generator is None or owner != self._generator_owner:
            seed = self.seed if worker is None else (self.seed + worker.seed) % 2**63
            self._generator = torch.Generator().manual_seed(seed)
            self._generator_owner = owner
        return self._generator

    def _mask(self, input_ids: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        word_starts = None
        if self.word_start_ids is not None:
            after_special = torch.ones_like(input_ids, dtype=torch.bool)
            after_special[:, 1:] = self.special[input_ids[:, :-1]]
            word_starts = self.word_start_ids[input_ids] | after_special
            if self.cfg.max_ngram > 1:
                word_starts = ngram_starts(word_starts, ~self.special[input_ids],
                                           self.cfg.max_ngram, generator)
        return mask_tokens(
            input_ids, self.special, self.cfg, self.vocab_size, self.mask_id, generator,
            word_starts,
        )

    def __call__(self, examples: list[dict]) -> dict[str, Tensor]:
        batch = collate_packed(examples, self.pad_id, LABEL_KEYS.values())
        batch.setdefault("token_type_ids", torch.zeros_like(batch["input_ids"]))
        seeds = batch.pop("mask_seed", None)
        if seeds is None:
            if self.cfg.static:
                raise PlmbenchError(
                    "static masking needs a mask_seed in every example; build the data with "
                    "PretrainDataModule or add mask_seed ints"
                )
            ids, labels = self._mask(batch["input_ids"], self._dynamic_generator())
        else:
            # mask each example on its unpadded ids, so its mask does not depend on the batch
            ids, labels = batch["input_ids"], torch.full_like(batch["input_ids"], IGNORE_INDEX)
            lengths = [len(example["input_ids"]) for example in examples]
            for row, (seed, n) in enumerate(zip(seeds.tolist(), lengths, strict=True)):
                generator = torch.Generator().manual_seed(seed)
                one = slice(row, row + 1), slice(0, n)
                ids[one], labels[one] = self._mask(ids[one], generator)
        batch["input_ids"], batch["labels"] = ids, labels
        return add_label_positions(batch)


def masked_lm_loss(hidden: Tensor, labels: Tensor, head: nn.Module,
                   positions: Tensor | None = None) -> Tensor:
    """Mean cross-entropy of ``head``'s vocabulary logits at the masked positions only.

    hidden: [B, T, H]; labels: [B, T] with IGNORE_INDEX at unmasked positions; ``positions``: the
    flat indices of the masked tokens (the collate's ``label_positions``; None: found here, which
    waits for the device). The head sees [N_masked, H], so no [B, T, V] logits tensor is built.
    """
    if positions is None:
        positions = label_positions({"labels": labels})
    logits = head(at_positions(hidden, positions))
    if logits.shape[0] == 0:  # nothing masked: a zero that keeps the graph, not NaN
        return logits.sum()
    return F.cross_entropy(logits, labels.flatten().index_select(0, positions))


class MaskedLM(PretrainingObjective):
    """BERT's pretraining objective (§3.1): L = L_MLM (+ L_NSP with ``nsp``), or ALBERT's
    L = L_MLM + L_SOP with ``sop`` (Lan et al. 2020, §3.1).

    Inputs are segment pairs "[CLS] A [SEP] B [SEP]" with ``nsp`` or ``sop``, else RoBERTa's
    FULL-SENTENCES (Liu et al. 2019, §4.2); masks are drawn in the collate (dynamic) or once per
    data copy (``static``, ``dupe_factor`` copies, §4.1). Eval: MLM loss per predicted token.
    """

    eval_metrics = ("mlm_loss",)
    packable = True

    #: the sentence-pair task's name, as in the head (``net.<task>_head``) and loss it uses
    PAIR_TASKS = {"nsp": "next-sentence-prediction", "sop": "sentence-order-prediction"}

    def __init__(self, name: str = "mlm", nsp: bool = False, sop: bool = False,
                 **masking) -> None:
        if nsp and sop:
            raise PlmbenchError(f"objective {name}: nsp and sop are two sentence-pair tasks; "
                                "set one of them (ALBERT: sop)")
        self.name, self.nsp, self.sop = name, nsp, sop
        self.pair_task = "nsp" if nsp else "sop" if sop else None
        self.masking = MaskingConfig(**masking)
        self.copies = self.masking.dupe_factor if self.masking.static else 1
        self.seeded = self.masking.static

    def check(self, net: nn.Module, tokenizer: TextTokenizer) -> None:
        pair_head = self.pair_task and not hasattr(net, f"{self.pair_task}_head")
        if not hasattr(net, "mlm_head") or pair_head:
            head = self.PAIR_TASKS[self.pair_task] if hasattr(net, "mlm_head") else "masked-LM"
            raise PlmbenchError(
                f"{type(net).__name__} has no {head} head; pick an objective it supports "
                "(objective=mlm for RoBERTa and DistilBERT)"
            )
        special = tokenizer.special
        if special.cls is None or special.sep is None:
            raise PlmbenchError("pretraining inputs need the tokenizer's cls/bos and sep/eos "
                                "tokens; name them in its tokenizer_config.json")

    def make_examples(self, max_length: int, tokenizer: TextTokenizer,
                      packing: PackingConfig | None = None):
        special = tokenizer.special
        return partial(make_segment_pairs, max_tokens=max_length, nsp=self.nsp, sop=self.sop,
                       cls_id=special.cls, sep_id=special.sep, packing=packing)

    def collator(self, tokenizer: TextTokenizer, seed: int) -> MLMCollator:
        return MLMCollator(tokenizer, self.masking, seed)

    def losses(self, net: nn.Module, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        out = net(**encoder_inputs(batch))
        losses = {"mlm_loss": masked_lm_loss(out.last_hidden_state, batch["labels"], net.mlm_head,
                                             label_positions(batch))}
        if self.pair_task:
            task, pooled = self.pair_task, out.pooler_output
            if "sequence_starts" in batch:  # packed rows: every example's [CLS]
                first = at_positions(out.last_hidden_state, batch["sequence_starts"])
                pooled = getattr(net, net.prefix).pool(first)
            losses[f"{task}_loss"] = next_sentence_loss(
                pooled, batch[LABEL_KEYS[task]], getattr(net, f"{task}_head"))
        return losses

    def evaluate(self, net: nn.Module, batch: Mapping[str, Tensor]
                 ) -> dict[str, tuple[Tensor, Tensor]]:
        predicted = (batch["labels"] != IGNORE_INDEX).sum()
        return {"mlm_loss": (self.losses(net, batch)["mlm_loss"], predicted)}

    def summarize(self, means: Mapping[str, float]) -> dict[str, float]:
        return {**means, "perplexity": perplexity(means["mlm_loss"])}

    def flops(self, shape: EncoderShape, batch: Mapping[str, Tensor]) -> float:
        """Counted from shapes, known on the host: the masked positions are the collate's."""
        batch_size, seq_len = batch["input_ids"].shape
        return mlm_training_flops(shape, batch_size, seq_len, len(label_positions(batch)))
