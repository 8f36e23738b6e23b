"""N-gram masking: masked-LM targets of up to N complete words, as ALBERT draws them.

Lan et al. 2020 (ALBERT), §4.1: "We generate masked inputs for the MLM targets using n-gram
masking (Joshi et al., 2019), with the length of each n-gram mask selected randomly. The
probability for the length n is given by p(n) = (1/n) / sum_{k=1}^{N} (1/k). We set the maximum
length of n-gram (i.e., n) to be 3 (i.e., the MLM target can consist of up to a 3-gram of
complete words, such as "White House correspondents")."

Here each row's words are cut into consecutive n-grams whose lengths are drawn from p(n), and
the masked-LM selection (``mlm.mask_tokens``) then takes whole n-grams, in a random order, while
they fit the 15% budget, as it takes whole words. ALBERT's create_pretraining_data.py draws a
length per start word and, when the n-gram does not fit, tries shorter ones; both leave the
lengths of the selected n-grams distributed as p(n) up to the last few picks of a sequence.
A special token (or any token that is never selected) ends an n-gram, so none spans a [SEP].
"""

import torch
from torch import Tensor


def ngram_probabilities(max_ngram: int) -> Tensor:
    """p(n) = (1/n) / sum_k (1/k) for n = 1 .. max_ngram."""
    inverse = 1.0 / torch.arange(1, max_ngram + 1, dtype=torch.float64)
    return inverse / inverse.sum()


def ngram_starts(word_starts: Tensor, candidates: Tensor, max_ngram: int,
                 generator: torch.Generator | None = None) -> Tensor:
    """[B, T] bool, True where a token begins an n-gram of 1 .. ``max_ngram`` whole words.

    ``word_starts`` [B, T]: True where a token begins a word; ``candidates`` [B, T]: True where
    a token may be selected. Every non-candidate token is an n-gram of its own (never selected),
    and the first candidate after one begins a new n-gram.
    """
    batch, length = word_starts.shape
    draws = torch.multinomial(ngram_probabilities(max_ngram).float(), batch * length,
                              replacement=True, generator=generator)
    lengths = draws.view(batch, length).to(word_starts.device) + 1
    first_words = lengths.cumsum(1) - lengths  # word index at which each n-gram begins
    begins_ngram = torch.zeros(batch, length + 1, dtype=torch.bool, device=word_starts.device)
    begins_ngram.scatter_(1, first_words.clamp(max=length), True)  # past the end: spare column
    words = word_starts & candidates
    word_index = (words.long().cumsum(1) - 1).clamp(min=0)
    starts = words & begins_ngram.gather(1, word_index)
    after_other = torch.ones_like(candidates)
    after_other[:, 1:] = ~candidates[:, :-1]
    return starts | ~candidates | (candidates & after_other)
