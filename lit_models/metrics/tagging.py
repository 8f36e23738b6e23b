"""Entity-level scores of BIO tag sequences (Tjong Kim Sang & De Meulder 2003, CoNLL's
conlleval): an entity counts when its type and both boundaries match; precision, recall and F1
micro-averaged over entities, computed by ``seqeval`` (conlleval's reimplementation). Tags are read
as conlleval reads them: an I-X that continues no X entity opens one (``bio_decode``). Registered
as ``precision``, ``recall`` and ``f1`` over ``tags``."""

from collections.abc import Sequence

from seqeval.metrics import f1_score, precision_score, recall_score

from lit_models.metrics.registry import register_metric


def bio_decode(tags: Sequence[str]) -> list[str]:
    """Tags as entities are read from them: an I-X after anything but B-X / I-X becomes B-X."""
    out, previous = [], "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]
        out.append(tag)
        previous = tag
    return out


@register_metric("precision", "recall", "f1", inputs="tags", whole_split=True)
def entity_scores(predicted: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], **_
                  ) -> dict[str, float]:
    """Entity-level micro precision, recall and F1 (0..1) by seqeval."""
    gold, predicted = list(map(list, gold)), list(map(list, predicted))
    return {"precision": precision_score(gold, predicted, zero_division=0),
            "recall": recall_score(gold, predicted, zero_division=0),
            "f1": f1_score(gold, predicted, zero_division=0)}
