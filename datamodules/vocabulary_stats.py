"""How much two vocabularies share, and how finely a vocabulary cuts a domain's text.

SciBERT (Beltagy et al. 2019, §2) builds SciVocab, a WordPiece vocabulary of the same size as
BERT's BaseVocab, on scientific text, and reports "the resulting token overlap between BaseVocab
and SciVocab is 42%": ``vocabulary_overlap`` is that share, |V ∩ V_ref| / |V|, over the tokens of
the vocabularies without their special tokens (for equal sizes it is the same either way round).
A vocabulary fitted to a domain cuts its words into fewer pieces: ``subtokens_per_word`` is the
mean number of tokens per whitespace-separated word of a text, encoded sentence by sentence as a
model reads it, without special tokens.
"""

from collections.abc import Iterable

from datamodules.errors import PlmbenchError
from datamodules.tokenization import TextTokenizer


def vocabulary(tokenizer: TextTokenizer) -> set[str]:
    """The token strings of a vocabulary, its special tokens left out."""
    backend = tokenizer.backend
    special = {token.content for token in backend.get_added_tokens_decoder().values()
               if token.special}
    return set(backend.get_vocab()) - special - set(tokenizer.roles.values())


def vocabulary_overlap(tokenizer: TextTokenizer, reference: TextTokenizer) -> float:
    """The share of ``tokenizer``'s tokens that ``reference``'s vocabulary holds too."""
    tokens = vocabulary(tokenizer)
    return len(tokens & vocabulary(reference)) / len(tokens)


def subtokens_per_word(tokenizer: TextTokenizer, sentences: Iterable[str]) -> float:
    """Tokens per whitespace-separated word of ``sentences``."""
    sentences = [sentence for sentence in sentences if sentence.split()]
    if not sentences:
        raise PlmbenchError("no words to count sub-tokens of; check the task's text_field and caps")
    encodings = tokenizer.backend.encode_batch(sentences, add_special_tokens=False)
    tokens = sum(len(encoding.ids) for encoding in encodings)
    return tokens / sum(len(sentence.split()) for sentence in sentences)
