"""T5's unsupervised objectives (Raffel et al. 2020, §3.3, Tables 3-7) as the modes of one
objective for encoder-decoders: a noise mask picks the corrupted tokens (``noise_masks.py``), an
input encoding and a target encoding turn the example and its mask into what the encoder reads and
what the decoder writes; both end with </s>. The official study's configurations
(``t5/models/gin/objectives``, named <noise>_<density>_<inputs>_<targets>) are, by mode:

=================  ===========  =================================  ===========================
mode               noise        input                              target
=================  ===========  =================================  ===========================
prefix_lm          prefix       the prefix                         the rest (Table 4)
bert_style         i.i.d. 15%   90% -> mask, 10% -> random token   the original (Table 4)
deshuffling        every token  the tokens shuffled                the original (Table 4)
mass_style         i.i.d. 15%   each -> mask                       the original (Table 5)
replace_spans      i.i.d. 15%   each span -> a sentinel            sentinel + span (Tables 5, 6)
drop_tokens        i.i.d. 15%   corrupted tokens dropped           the corrupted tokens (Table 5)
span_corruption    spans        each span -> a sentinel            sentinel + span (Table 7)
=================  ===========  =================================  ===========================

The i.i.d. rate is ``noise_density`` (Table 6: 10%, 15%, 25%, 50% with replace_spans), the span
length ``mean_noise_span_length`` (Table 7: 2, 3, 5, 10 at 15%; span_corruption at 15% and 3 is
the final T5 objective, §3.7). "MASS-style" is the paper's name for BERT's masking without the
random tokens (§3.3.2, Table 3's "Thank you <M> <M> me to your party <M> week."), i.i.d. as the
released ``iid_15_m_f`` configuration, not MASS's one consecutive fragment (Song et al. 2019).

Sentinels are <extra_id_0>, <extra_id_1>, ... in order of the spans. The target of the sentinel
encodings lists each sentinel followed by the span it replaced, and a last sentinel when the
example ends with kept tokens (Table 3's "<X> for inviting <Y> last <Z>"): spans that end the
example, as random spans always do, need none. The released code numbers the target's sentinels
by the kept spans instead, which puts them one apart from the input's when an i.i.d. mask
corrupts the first token; here they always align. The mask token is the tokenizer's own (BART's
<mask>), else <extra_id_0> (the released ``sentinel_id``); a random token is any token of the
vocabulary but the special ones and the sentinels.

Examples are blocks of the corpus's token stream (T5 concatenates documents and splits the
stream), of the raw length whose input just fits the length limit; prefix LM and deshuffling cut
each document on its own, as their released configurations do (no ``reduce_concat_tokens``). The
decoder reads the target shifted right after its start token; the loss is the target's negative
log-likelihood (``denoising.reconstruction_loss``). Corruption runs in the collate: a new noise
every time (dynamic), or fixed by an example's ``mask_seed`` (eval examples).
"""

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

from torch import Tensor, nn

from datamodules.collate import IGNORE_INDEX, pad_collate
from datamodules.errors import PlmbenchError
from datamodules.tokenization import TextTokenizer
from lit_models.objectives.base import (
    Documents,
    ExampleRandomness,
    PretrainingObjective,
    perplexity,
    special_ids,
)
from lit_models.objectives.denoising import reconstruction_loss, require_encoder_decoder
from lit_models.objectives.flops import EncoderShape, encoder_decoder_training_flops
from lit_models.objectives.noise_masks import (
    SpanConfig,
    full_noise_mask,
    iid_noise_mask,
    random_prefix_noise_mask,
    random_spans_noise_mask,
)


@dataclass(frozen=True)
class Vocabulary:
    """The ids the encodings write: sentinels in order, the mask, and the ordinary tokens a
    random replacement is drawn from."""

    sentinels: tuple[int, ...]
    mask: int | None
    ordinary: tuple[int, ...]


#: an encoding: (tokens, noise mask, vocabulary, rng) -> the ids it writes
Encoding = Callable[[list[int], list[bool], Vocabulary, random.Random], list[int]]


def starts(noise: list[bool]) -> list[bool]:
    """Where a noise span begins."""
    return [n and (i == 0 or not noise[i - 1]) for i, n in enumerate(noise)]


def sentinel_spans(tokens, noise, vocabulary, rng) -> list[int]:
    """Kept tokens, each corrupted span replaced by the next sentinel (inputs "u")."""
    out, span = [], 0
    for token, corrupted, first in zip(tokens, noise, starts(noise), strict=True):
        if first:
            out.append(vocabulary.sentinels[span])
            span += 1
        if not corrupted:
            out.append(token)
    return out


def spans_after_sentinels(tokens, noise, vocabulary, rng) -> list[int]:
    """Each sentinel followed by the span it replaced; a closing sentinel when the example ends
    with kept tokens (targets "u")."""
    out, span = [], 0
    for token, corrupted, first in zip(tokens, noise, starts(noise), strict=True):
        if first:
            out.append(vocabulary.sentinels[span])
            span += 1
        if corrupted:
            out.append(token)
    return [*out, vocabulary.sentinels[span]] if tokens and not noise[-1] else out


def mask_tokens(tokens, noise, vocabulary, rng) -> list[int]:
    """Each corrupted token replaced by the mask (inputs "m")."""
    return [vocabulary.mask if corrupted else t for t, corrupted in zip(tokens, noise, strict=True)]


def mask_or_random(tokens, noise, vocabulary, rng, random_token_rate: float = 0.1) -> list[int]:
    """Each corrupted token replaced by a random ordinary token with probability
    ``random_token_rate``, else by the mask (BERT without its unchanged 10%, §3.3.1)."""
    out = []
    for token, corrupted in zip(tokens, noise, strict=True):
        if corrupted:
            token = (rng.choice(vocabulary.ordinary) if rng.random() < random_token_rate
                     else vocabulary.mask)
        out.append(token)
    return out


def drop_noise(tokens, noise, vocabulary, rng) -> list[int]:
    """The kept tokens (inputs and targets "d")."""
    return [t for t, corrupted in zip(tokens, noise, strict=True) if not corrupted]


def keep_noise(tokens, noise, vocabulary, rng) -> list[int]:
    """The corrupted tokens."""
    return [t for t, corrupted in zip(tokens, noise, strict=True) if corrupted]


def permute_noise(tokens, noise, vocabulary, rng) -> list[int]:
    """The corrupted tokens shuffled among their places (inputs "p")."""
    shuffled = keep_noise(tokens, noise, vocabulary, rng)
    rng.shuffle(shuffled)
    picks = iter(shuffled)
    return [next(picks) if corrupted else t for t, corrupted in zip(tokens, noise, strict=True)]


def original(tokens, noise, vocabulary, rng) -> list[int]:
    """The uncorrupted example (targets "f")."""
    return list(tokens)


@dataclass(frozen=True)
class Mode:
    noise: str  # iid | spans | prefix | all
    inputs: Encoding
    targets: Encoding
    across_documents: bool = True  # blocks of the stream of documents, else of each document
    options: tuple[str, ...] = ()  # the settings the mode takes besides noise_density

    @property
    def sentinels(self) -> bool:
        return self.inputs is sentinel_spans

    @property
    def masks(self) -> bool:
        return self.inputs in (mask_tokens, mask_or_random)


MODES = {
    "prefix_lm": Mode("prefix", keep_noise, drop_noise, across_documents=False),
    "bert_style": Mode("iid", mask_or_random, original, options=("random_token_rate",)),
    "deshuffling": Mode("all", permute_noise, original, across_documents=False),
    "mass_style": Mode("iid", mask_tokens, original),
    "replace_spans": Mode("iid", sentinel_spans, spans_after_sentinels),
    "drop_tokens": Mode("iid", drop_noise, keep_noise),
    "span_corruption": Mode("spans", sentinel_spans, spans_after_sentinels,
                            options=("mean_noise_span_length",)),
}


def sentinels(tokenizer: TextTokenizer) -> list[int]:
    """The ids of <extra_id_0>, <extra_id_1>, ... as far as the vocabulary has them."""
    ids = []
    while (i := tokenizer.backend.token_to_id(f"<extra_id_{len(ids)}>")) is not None:
        ids.append(i)
    return ids


def vocabulary_of(tokenizer: TextTokenizer) -> Vocabulary:
    """The tokenizer's sentinels, its mask token (else <extra_id_0>, else None) and the rest."""
    found = sentinels(tokenizer)
    mask = tokenizer.special.mask
    if mask is None and found:
        mask = found[0]
    excluded = special_ids(tokenizer) | set(found)
    ordinary = tuple(i for i in range(tokenizer.vocab_size) if i not in excluded)
    return Vocabulary(tuple(found), mask, ordinary)


def token_blocks(documents: Documents, rng: random.Random, length: int,
                 across_documents: bool = True) -> list[dict]:
    """The documents' token stream (or each document's tokens) cut into blocks of ``length``,
    the last one shorter; a block of fewer than 2 tokens has nothing to corrupt and is left out."""
    streams = [[t for sentence in document for t in sentence] for document in documents]
    if across_documents:
        streams = [[t for stream in streams for t in stream]]
    return [{"tokens": stream[i:i + length]} for stream in streams
            for i in range(0, len(stream), length) if len(stream[i:i + length]) > 1]


class T5DenoisingCollator:
    """Corrupts and pads blocks: input_ids, labels (the target) and decoder_input_ids (the
    labels shifted right after the decoder's start token)."""

    def __init__(self, mode: Mode, noise: Callable[[int, random.Random], list[bool]],
                 inputs: Encoding, vocabulary: Vocabulary, tokenizer: TextTokenizer,
                 decoder_start: int, seed: int = 0) -> None:
        self.mode, self.noise, self.inputs, self.vocabulary = mode, noise, inputs, vocabulary
        self.eos, self.pad = tokenizer.special.sep, tokenizer.special.pad
        self.decoder_start = decoder_start
        self.randomness = ExampleRandomness(seed)

    def corrupt(self, tokens: list[int], rng: random.Random) -> tuple[list[int], list[int]]:
        """(input, target) of one block, each ending with </s>."""
        noise = self.noise(len(tokens), rng)
        inputs = self.inputs(tokens, noise, self.vocabulary, rng)
        targets = self.mode.targets(tokens, noise, self.vocabulary, rng)
        return [*inputs, self.eos], [*targets, self.eos]

    def __call__(self, examples: list[dict]) -> dict[str, Tensor]:
        rows = []
        for example in examples:
            inputs, targets = self.corrupt(example["tokens"], self.randomness.rng(example))
            rows.append({"input_ids": inputs, "labels": targets,
                         "decoder_input_ids": [self.decoder_start, *targets[:-1]]})
        return pad_collate(rows, self.pad)


class T5Denoising(PretrainingObjective):
    """``objective=t5_<mode>`` (conf/objective/t5_*.yaml; ``span_corruption.yaml`` is T5's own):
    one of ``MODES`` with its noise density, span length and random-token rate."""

    def __init__(self, mode: str = "span_corruption", name: str | None = None,
                 noise_density: float | None = None, mean_noise_span_length: float | None = None,
                 random_token_rate: float | None = None) -> None:
        if mode not in MODES:
            raise PlmbenchError(f"objective mode {mode!r} is unknown; use one of "
                                f"{', '.join(MODES)} (Raffel et al. 2020, §3.3)")
        self.mode, self.name = MODES[mode], name or mode
        given = {"mean_noise_span_length": mean_noise_span_length,
                 "random_token_rate": random_token_rate}
        if wrong := [k for k, v in given.items() if v is not None and k not in self.mode.options]:
            takes = ", ".join(["noise_density"] * (self.mode.noise in ("iid", "spans"))
                              + list(self.mode.options)) or "no setting"
            raise PlmbenchError(f"objective {self.name}: mode {mode} takes no {wrong[0]}; it "
                                f"takes {takes}")
        iid_or_spans = self.mode.noise in ("iid", "spans")
        if iid_or_spans != (noise_density is not None):
            raise PlmbenchError(f"objective {self.name}: mode {mode} "
                                + ("needs a noise_density in (0, 1)" if iid_or_spans else
                                   f"corrupts by its {self.mode.noise} mask, without "
                                   "noise_density"))
        self.spans = SpanConfig(noise_density or 0.15, mean_noise_span_length or 3.0)
        self.random_token_rate = 0.1 if random_token_rate is None else random_token_rate
        if not 0.0 <= self.random_token_rate <= 1.0:
            raise PlmbenchError(f"objective {self.name}: random_token_rate="
                                f"{random_token_rate} must lie in [0, 1] (§3.3.1: 0.1)")
        self.loss_name = f"{self.name}_loss"
        self.eval_metrics = (self.loss_name,)
        self.decoder_start: int | None = None
        self.decoder_layers = 0

    def noise_mask(self, length: int, rng: random.Random) -> list[bool]:
        noise = self.mode.noise
        if noise == "iid":
            return iid_noise_mask(length, self.spans.noise_density, rng)
        if noise == "spans":
            return random_spans_noise_mask(length, self.spans, rng)
        return random_prefix_noise_mask(length, rng) if noise == "prefix" else \
            full_noise_mask(length)

    def block_length(self, max_length: int) -> int:
        """Raw tokens per example: those whose input, </s> included, fits ``max_length``."""
        if self.mode.noise == "spans":
            return self.spans.raw_length(max_length)
        return max_length - 1

    def sentinels_needed(self, length: int) -> int:
        """The most sentinels an example of ``length`` tokens can take: random spans end in
        noise; an i.i.d. mask has at most length // 2 + 1 spans with a closing sentinel."""
        if not self.mode.sentinels:
            return 0
        return self.spans.counts(length)[1] if self.mode.noise == "spans" else length // 2 + 1

    def check(self, net: nn.Module, tokenizer: TextTokenizer) -> None:
        require_encoder_decoder(net, f"objective {self.name} pretrains T5-style models")
        if tokenizer.special.sep is None:
            raise PlmbenchError(f"objective {self.name} ends inputs and targets with the "
                                "tokenizer's eos token; name it in its tokenizer_config.json")
        if self.mode.masks and vocabulary_of(tokenizer).mask is None:
            raise PlmbenchError(f"objective {self.name} masks tokens, and the tokenizer has "
                                "neither a mask token nor <extra_id_0>; use a T5 or BART "
                                "vocabulary")
        self.decoder_start = net.config.decoder_start_token_id
        self.decoder_layers = net.config.decoder_layers

    def make_examples(self, max_length: int, tokenizer: TextTokenizer):
        length = self.block_length(max_length)
        needed, found = self.sentinels_needed(length), len(sentinels(tokenizer))
        if needed > found:
            raise PlmbenchError(
                f"objective {self.name} on {max_length}-token inputs needs up to {needed} "
                f"sentinels <extra_id_0> .. <extra_id_{needed - 1}>, and the tokenizer has "
                f"{found}; use a T5 vocabulary or a shorter task.max_length"
            )
        return partial(token_blocks, length=length, across_documents=self.mode.across_documents)

    def collator(self, tokenizer: TextTokenizer, seed: int) -> T5DenoisingCollator:
        inputs = self.mode.inputs
        if inputs is mask_or_random:
            inputs = partial(mask_or_random, random_token_rate=self.random_token_rate)
        if self.decoder_start is None:
            raise ValueError("check(net, tokenizer) names the decoder's start token first")
        return T5DenoisingCollator(self.mode, self.noise_mask, inputs, vocabulary_of(tokenizer),
                                   tokenizer, self.decoder_start, seed)

    def losses(self, net: nn.Module, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        return {self.loss_name: reconstruction_loss(net, batch)}

    def evaluate(self, net: nn.Module, batch: Mapping[str, Tensor]
                 ) -> dict[str, tuple[Tensor, Tensor]]:
        predicted = (batch["labels"] != IGNORE_INDEX).sum()
        return {self.loss_name: (reconstruction_loss(net, batch), predicted)}

    def summarize(self, means: Mapping[str, float]) -> dict[str, float]:
        return {**means, "perplexity": perplexity(means[self.loss_name])}

    def flops(self, shape: EncoderShape, batch: Mapping[str, Tensor]) -> Tensor:
        """Encoder over the inputs, decoder over the targets, the output layer at every target
        token (a device tensor: counting does not synchronise)."""
        return encoder_decoder_training_flops(shape, self.decoder_layers, batch)
