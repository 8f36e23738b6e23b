"""BLEU (Papineni et al. 2002): the geometric mean of the modified n-gram precisions (n = 1..4,
§2.1) times the brevity penalty (§2.2.2), over the whole corpus, on 0..100, as ``sacrebleu``
computes it (Post 2018, "A Call for Clarity in Reporting BLEU Scores": its default 13a
tokenisation, no lowercasing, exponential smoothing), so a score here is the one ``sacrebleu``'s
command line prints for the same files. Registered as ``bleu`` over ``texts`` (one reference per
example); a corpus statistic, so it is computed once per split from every generation."""

from collections.abc import Sequence

import sacrebleu

from lit_models.metrics.registry import register_metric


@register_metric("bleu", inputs="texts", whole_split=True)
def bleu(predictions: Sequence[str], references: Sequence[str], **_) -> float:
    """Corpus BLEU of ``predictions`` against one reference each."""
    return sacrebleu.corpus_bleu(list(predictions), [list(references)]).score
