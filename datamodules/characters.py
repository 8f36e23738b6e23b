"""ELMo's character input (Peters et al. 2018, §3.4; the released model's ``ELMoCharacterMapper``).

A word is spelled as at most ``MAX_CHARACTERS`` (50) character ids: begin-of-word, the first 48
bytes of its UTF-8 encoding, end-of-word, then a within-word padding character. Bytes are ids 0-255
and five markers follow them: begin/end of sentence (256, 257: the whole "words" ``<S>`` and
``</S>`` are begin-of-word, the marker, end-of-word), begin/end of word (258, 259) and padding
(260). Every id is shifted by one so that 0 pads whole word positions of a batch: 262 character
embeddings in all. No vocabulary: any word, seen in training or not, has a spelling.
"""

from collections.abc import Sequence

import numpy as np

from datamodules.words import BOS, EOS

MAX_CHARACTERS = 50
BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR = 256, 257, 258, 259, 260
#: character embedding rows: 261 characters + the word-padding id 0
NUM_CHARACTERS = 262


def _marker(char: int) -> np.ndarray:
    ids = np.full(MAX_CHARACTERS, PAD_CHAR, dtype=np.int16)
    ids[:3] = (BOW_CHAR, char, EOW_CHAR)
    return ids + 1


MARKERS = {BOS: _marker(BOS_CHAR), EOS: _marker(EOS_CHAR)}


def char_ids(words: Sequence[str]) -> np.ndarray:
    """int16 [len(words), MAX_CHARACTERS]: each word's character ids (already shifted by one)."""
    out = np.full((len(words), MAX_CHARACTERS), PAD_CHAR + 1, dtype=np.int16)
    for row, word in enumerate(words):
        marker = MARKERS.get(word)
        if marker is not None:
            out[row] = marker
            continue
        encoded = np.frombuffer(word.encode("utf-8", "ignore")[: MAX_CHARACTERS - 2],
                                dtype=np.uint8)
        out[row, 0] = BOW_CHAR + 1
        out[row, 1 : len(encoded) + 1] = encoded.astype(np.int16) + 1
        out[row, len(encoded) + 1] = EOW_CHAR + 1
    return out
