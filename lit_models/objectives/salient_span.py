"""Salient span masking (SSM): mask one named entity or date of a sentence, whole.

Guu et al. 2020 (REALM), §3.4 "Salient span masking": "we identify salient spans using a
BERT-based tagger trained on CoNLL-2003 data to identify named entities, and a regular expression
to identify dates. We select and mask one of these salient spans within a sentence for the masked
language modeling task"; Roberts et al. 2020 (§3.2) reuse it for T5's closed-book QA.
REALM's released code (google-research/language, realm/) fixes what the paper leaves open:

- example_generator.text_features_to_query: a query is one sentence; a span crossing a sentence
  boundary is ignored; one span is drawn uniformly at random; a text with no salient span is
  *skipped* ("no_valid_spans"), and so is one whose span would be truncated ("masking_error").
  ``fallback="drop"`` does that; ``fallback="random"`` keeps such sentences with BERT's random
  token masking instead (``MaskingConfig``, 80/10/10), our option, not REALM's.
- featurization.Featurizer.mask_query: every token lying strictly within the span's characters
  is replaced by [MASK], with no 80/10/10 (so ``mask_token_rate`` does not apply to spans).

Span finders (``SalientSpans``): dates by a regular expression (``DATE``: "12 March 1990",
"March 12, 1990", "March 1990", "1990", "1990s"); named entities, offline, by a documented
heuristic (``capitalised_runs``: maximal runs of capitalised words, joined by inner connectives
such as "of", and not merely the sentence's capitalised first word), since the mirror has no
CoNLL-2003 to train REALM's tagger on; or by any callable ``text -> [(start, end)]`` given as
``entities`` (REALM's tagger: ``lit_models.families.entity_tagger.TaggerEntities``, built by Hydra
from
the objective's config, so this module never imports it; a finder with a ``find_batch(texts)``
gets a split's sentences at once). Character spans become tokens through the fast
tokenizer's offsets. Sentences come as text (``reads_text``): the DataModule hands this objective
documents of sentence strings instead of token ids.
"""

from collections.abc import Callable, Mapping, Sequence
from functools import partial

import regex
import torch
from tokenizers import Encoding, Tokenizer

from datamodules.collate import IGNORE_INDEX, add_label_positions, pad_collate
from datamodules.errors import PlmbenchError
from datamodules.tokenization import TextTokenizer
from lit_models.objectives.base import ExampleRandomness
from lit_models.objectives.mlm import MaskedLM, MLMCollator

Span = tuple[int, int]  # [start, end) characters, or tokens

_MONTH = (r"(?:January|February|March|April|May|June|July|August|September|October|November|"
          r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?")
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?:1\d{3}|20\d{2})"
#: dates, longest form first: "12 March 1990", "March 12, 1990", "March 1990", "March 12",
#: "1990s", "1990"
DATE = regex.compile(
    rf"(?<![\w])(?:{_DAY} {_MONTH},? {_YEAR}|{_MONTH} {_DAY},? {_YEAR}|{_MONTH},? {_YEAR}"
    rf"|{_MONTH} {_DAY}|{_YEAR}s|{_YEAR})(?![\w])")
#: a word: an abbreviation with its periods ("U.S."), or letters and digits with inner apostrophes
#: and hyphens ("O'Neil", "Jean-Paul")
WORD = regex.compile(r"\w+(?:\.\w+)+\.?|[\p{L}\p{N}]+(?:['’\-][\p{L}\p{N}]+)*")
#: lower-case words that may join two capitalised words inside a name ("Bank of England")
CONNECTIVES = frozenset({"of", "the", "de", "du", "la", "le", "von", "van", "der", "den", "y",
                         "da", "di", "del", "al", "bin", "for", "on", "upon"})
#: capitalised only because they begin the sentence: dropped from the front of a run there
SENTENCE_STARTERS = frozenset(
    "The A An In On At It Its This That These Those He She They We I You His Her Their Our My "
    "After Before During Since Although Though While When Where If As By For From With Without "
    "Following According Despite However Thus Also There Then Both Some Many Most Other "
    "Another Each Every One Two Three Several Such No Not".split())


def date_spans(text: str) -> list[Span]:
    return [m.span() for m in DATE.finditer(text)]


def find_all(find: Callable[[str], list[Span]], texts: Sequence[str]) -> list[list[Span]]:
    """``find`` over ``texts``: by its ``find_batch(texts)`` where it has one (a tagger tags many
    sentences per forward pass), else text by text."""
    batched = getattr(find, "find_batch", None)
    return batched(texts) if batched else [find(text) for text in texts]


def capitalised_runs(text: str) -> list[Span]:
    """Maximal runs of capitalised words separated by single spaces, inner connectives allowed
    ("University of Notre Dame"); a run beginning the sentence loses a leading common word
    ("The", "In", ...) and a one-word run there is dropped (only capitalised as the first word)."""
    words = [m.span() for m in WORD.finditer(text)]
    spans, run = [], []

    def close() -> None:
        while run and text[slice(*run[-1])] in CONNECTIVES:  # a connective never ends a name
            run.pop()
        if run and run[0] == words[0]:  # the sentence's first word
            if text[slice(*run[0])] in SENTENCE_STARTERS:
                del run[0]
                while run and text[slice(*run[0])] in CONNECTIVES:
                    del run[0]
            elif len(run) == 1:
                run.clear()
        if run:
            spans.append((run[0][0], run[-1][1]))
        run.clear()

    for i, (start, end) in enumerate(words):
        word = text[start:end]
        joined = bool(run) and text[run[-1][1]:start] == " "
        if word[0].isupper() and not (word == "I" and len(run) == 0):
            if run and not joined:
                close()
            run.append((start, end))
        elif word in CONNECTIVES and joined and i + 1 < len(words) \
                and text[words[i + 1][0]].isupper() and text[end:words[i + 1][0]] == " ":
            run.append((start, end))
        else:
            close()
    close()
    return spans


class SalientSpans:
    """``text -> spans``: dates (``dates``) and named entities (``entities``: "heuristic" for
    ``capitalised_runs``, "none", or a callable ``text -> spans``), sorted, an entity overlapping
    a date dropped; ``find_batch`` finds the entities of many texts at once."""

    def __init__(self, dates: bool = True,
                 entities: str | Callable[[str], list[Span]] = "heuristic") -> None:
        if isinstance(entities, str) and entities not in ("heuristic", "none"):
            raise PlmbenchError(f"salient span entities={entities!r}: use heuristic, none or a "
                                "callable text -> [(start, end)] given by its _target_ (a "
                                "tagger: lit_models.families.entity_tagger.TaggerEntities)")
        self.dates = dates
        self.entities = {"heuristic": capitalised_runs, "none": None}.get(entities, entities) \
            if isinstance(entities, str) else entities

    def find_batch(self, texts: Sequence[str]) -> list[list[Span]]:
        found = find_all(self.entities, texts) if self.entities is not None else [[]] * len(texts)
        out = []
        for text, entities in zip(texts, found, strict=True):
            spans = date_spans(text) if self.dates else []
            spans += [e for e in entities if not any(e[0] < d[1] and d[0] < e[1] for d in spans)]
            out.append(sorted(set(spans)))
        return out

    def __call__(self, text: str) -> list[Span]:
        return self.find_batch([text])[0]


def token_span(encoding: Encoding, span: Span) -> Span | None:
    """The tokens of the first sequence lying strictly within the characters ``span`` (REALM's
    mask_query rule) as [first, last + 1); None where there are none (or it was truncated)."""
    first = [(i, offsets) for i, (seq, offsets) in enumerate(zip(
        encoding.sequence_ids, encoding.offsets, strict=True)) if seq == 0]
    if not first or span[1] > first[-1][1][1]:  # cut off by truncation
        return None
    inside = [i for i, (start, end) in first if start >= span[0] and end <= span[1] and end > start]
    if not inside:
        return None
    return inside[0], inside[-1] + 1


def salient_span_examples(documents: Sequence[Sequence[str]], rng=None, *, backend: Tokenizer,
                          find: Callable[[str], list[Span]], fallback: str = "drop"
                          ) -> list[dict]:
    """One example per sentence: ``input_ids`` ([CLS] sentence [SEP], truncated by ``backend``)
    and ``spans`` (flat token bounds [s0, e0, s1, e1, ...] of its salient spans); a sentence
    without one is dropped, or kept with no span (``fallback="random"``)."""
    sentences = [s for document in documents for s in document]
    examples = []
    for found, encoding in zip(find_all(find, sentences), backend.encode_batch(sentences),
                               strict=True):
        spans = [t for t in (token_span(encoding, s) for s in found) if t is not None]
        if spans or fallback == "random":
            examples.append({"input_ids": encoding.ids,
                             "spans": [bound for span in spans for bound in span]})
    return examples


def pick_span(example: Mapping, rng) -> Span | None:
    """One of the example's ``spans``, uniformly (REALM: random.choice); None if it has none."""
    bounds = example["spans"]
    if not bounds:
        return None
    i = rng.randrange(len(bounds) // 2)
    return bounds[2 * i], bounds[2 * i + 1]


class SalientSpanCollator(MLMCollator):
    """Pads sentences and masks one salient span of each, all its tokens [MASK]; a sentence
    without a span (``fallback="random"``) gets BERT's random masking (``MLMCollator``'s)."""

    def __init__(self, tokenizer: TextTokenizer, masking, seed: int = 0) -> None:
        super().__init__(tokenizer, masking, seed)
        self.randomness = ExampleRandomness(seed)

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        batch = pad_collate([{k: v for k, v in e.items() if k not in ("spans", "mask_seed")}
                             for e in examples], self.pad_id)
        batch.setdefault("token_type_ids", torch.zeros_like(batch["input_ids"]))
        ids, labels = batch["input_ids"], torch.full_like(batch["input_ids"], IGNORE_INDEX)
        for row, example in enumerate(examples):
            rng = self.randomness.rng(example)
            span = pick_span(example, rng)
            if span is None:
                n = len(example["input_ids"])
                one = slice(row, row + 1), slice(0, n)
                generator = torch.Generator().manual_seed(rng.getrandbits(63))
                ids[one], labels[one] = self._mask(ids[one], generator)
                continue
            labels[row, span[0]:span[1]] = ids[row, span[0]:span[1]]
            ids[row, span[0]:span[1]] = self.mask_id
        batch["input_ids"], batch["labels"] = ids, labels
        return add_label_positions(batch)


class SalientSpanMasking(MaskedLM):
    """The masked LM over single sentences, each with one salient span masked (REALM §3.4);
    loss and evaluation are ``MaskedLM``'s (cross-entropy over the masked tokens)."""

    reads_text = True
    packable = False
    FALLBACKS = ("drop", "random")

    def __init__(self, name: str = "ssm", dates: bool = True,
                 entities: str | Callable[[str], list[Span]] = "heuristic",
                 fallback: str = "drop", **masking) -> None:
        if fallback not in self.FALLBACKS:
            raise PlmbenchError(f"objective {name}: fallback={fallback!r}; use drop (REALM) or "
                                "random")
        super().__init__(name, **masking)
        if self.masking.static:
            raise PlmbenchError(f"objective {name}: spans are drawn per batch; set static=false")
        self.find = SalientSpans(dates, entities)
        self.fallback = fallback

    def make_examples(self, max_length: int, tokenizer: TextTokenizer):
        backend = tokenizer.truncating(max_length)
        backend.no_padding()
        return partial(salient_span_examples, backend=backend, find=self.find,
                       fallback=self.fallback)

    def collator(self, tokenizer: TextTokenizer, seed: int) -> SalientSpanCollator:
        return SalientSpanCollator(tokenizer, self.masking, seed)
