"""Named entities found by a trained tagger: REALM's salient-span entity finder.

Guu et al. 2020 (REALM), §3.4: "we identify salient spans using a BERT-based tagger trained on
CoNLL-2003 data to identify named entities". ``TaggerEntities`` loads a tagging export (a run of
``plmbench run model=bert-base-cased task=ner/conll2003 save_model=true`` as ``ckpt:<run dir>``,
or any ``*ForTokenClassification`` directory with BIO tags as ``hf:<dir>``) and is the callable
``text -> [(start, end)]`` that ``SalientSpans(entities=...)`` takes. A text is split into words
as CoNLL-2003 is tokenised (``WORDS``: punctuation a word of its own, "U.S." and "Jean-Paul"
whole), the words are tagged as the tagging family tags them (``LitTagger``: the tag of each
word's first sub-token, read by ``bio_decode``), the entities are read from the tags as seqeval
reads them, and each entity is the characters from its first word's start to its last word's
end. ``find_batch`` tags ``batch_size`` texts per forward pass.
"""

from collections.abc import Sequence

import regex
import torch
from seqeval.metrics.sequence_labeling import get_entities
from torch import nn

from datamodules.collate import pad_collate
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from datamodules.tagging import PAD_VALUES, encode_words
from lit_models.families.tagging import LitTagger
from lit_models.interop.hf import TAGGER_HEAD_NAMES, from_hf, load_head, task_labels
from lit_models.objectives.salient_span import WORD, Span

#: CoNLL-2003's words: ``WORD`` (abbreviations with their periods, letters and digits with inner
#: apostrophes and hyphens), and every other non-space character on its own ("(", ",", ".")
WORDS = regex.compile(rf"{WORD.pattern}|[^\s\p{{L}}\p{{N}}]")
TRAIN_ONE = "train one with `plmbench run task=ner/conll2003 save_model=true`"


def words_of(text: str) -> list[Span]:
    """The character spans of ``text``'s words (``WORDS``)."""
    return [m.span() for m in WORDS.finditer(text)]


class TaggerEntities:
    """``text -> entity character spans`` by a tagging export (``ckpt:<run dir>`` or
    ``hf:<dir>``); ``max_length``: sub-tokens per text, words past it tagged "O" (the NER
    tasks' 128)."""

    def __init__(self, checkpoint: str, batch_size: int = 64, max_length: int = 128) -> None:
        init = InitFrom.parse(checkpoint, "entities checkpoint", pretrained=True)
        if init.hub_id is None and not init.path.is_dir():
            raise PlmbenchError(f"entities checkpoint={checkpoint!r} is no directory; pass "
                                f"ckpt:<run dir>, hf:<dir> or hf:<org>/<name> of a tagger "
                                f"({TRAIN_ONE})")
        directory = init.directory("entities checkpoint")
        labels = task_labels(directory, "tagger") if (directory / "config.json").is_file() \
            else None
        if not labels:
            raise PlmbenchError(f"entities checkpoint={checkpoint} is not a tagging export (no "
                                f"*ForTokenClassification in {directory}); {TRAIN_ONE}")
        _, encoder, tokenizer = from_hf(directory)
        self.tagger = LitTagger(encoder, labels, (), 0.0, {}).eval()
        load_head(nn.ModuleDict({"classifier": self.tagger.classifier}), directory,
                  TAGGER_HEAD_NAMES)
        self.encoder = tokenizer.words_encoder(max_length)
        self.pad_id = tokenizer.special.pad
        self.batch_size = batch_size

    @torch.inference_mode()
    def tag_words(self, sentences: Sequence[Sequence[str]]) -> list[list[str]]:
        """The predicted BIO tags of each sentence's words, as the tagging family predicts them."""
        tags = []
        for i in range(0, len(sentences), self.batch_size):
            chunk = [list(words) for words in sentences[i:i + self.batch_size]]
            batch = pad_collate(encode_words(self.encoder, chunk), self.pad_id, PAD_VALUES)
            predicted = self.tagger(batch).argmax(-1)
            tags += self.tagger.word_tags([(predicted, batch["word_ids"])],
                                          [len(words) for words in chunk])
        return tags

    def find_batch(self, texts: Sequence[str]) -> list[list[Span]]:
        """The entities of each text as character spans, in order."""
        words = [words_of(text) for text in texts]
        tagged = [i for i, w in enumerate(words) if w]  # a text of no word has no entity
        tags = self.tag_words([[texts[i][a:b] for a, b in words[i]] for i in tagged])
        found: list[list[Span]] = [[] for _ in texts]
        for i, sentence_tags in zip(tagged, tags, strict=True):
            found[i] = [(words[i][first][0], words[i][last][1])
                        for _, first, last in get_entities(sentence_tags)]
        return found

    def __call__(self, text: str) -> list[Span]:
        return self.find_batch([text])[0]
