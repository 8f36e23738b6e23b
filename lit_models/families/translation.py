"""Translation: the sequence-to-sequence family of summarization (``seq2seq.Seq2Seq``:
teacher-forced training, evaluation by generation with ``task.generation``,
``predictions/<split>.jsonl``) on WMT sentence pairs (``datamodules/translation.py``), scored with
corpus BLEU as sacreBLEU computes it (Post 2018; ``lit_models/metrics/bleu.py``), its signature
recorded beside the score. T5 reads the source after its task prefix ("translate English to
German: ", Raffel et al. 2020, Appendix D); BART reads it as it is (Lewis et al. 2020, §3.4
fine-tunes its whole model for translation into English, here without the extra source encoder);
GPT-2 continues "<s> source </s>" with the translation (Radford et al. 2019, §3.7 prompts
"english sentence = french sentence").
"""

from collections.abc import Callable, Mapping

from torchmetrics import Metric

from datamodules import translation
from datamodules.errors import PlmbenchError
from lit_models.families.seq2seq import Seq2Seq
from lit_models.metrics.bleu import SETTINGS, Bleu


class Translation(Seq2Seq):
    """Source sentence -> target sentence, scored with sacreBLEU's BLEU (``task.bleu``)."""

    data = translation.TranslationDataModule
    corpus = staticmethod(translation.vocabulary_corpus)

    def scorer(self, task: Mapping) -> Callable[[str], Metric]:
        settings = dict(task.get("bleu") or {})
        if unknown := sorted(set(settings) - set(SETTINGS)):
            raise PlmbenchError(f"task.bleu: unknown keys {unknown}; sacreBLEU's BLEU takes "
                                f"{', '.join(SETTINGS)}")
        try:
            Bleu(**settings)
        except (KeyError, AssertionError, TypeError) as err:
            raise PlmbenchError(f"task.bleu={settings}: sacreBLEU refuses it ({err!s}); see "
                                "`sacrebleu --help` for its tokenizers and smoothing methods"
                                ) from None
        return lambda split: Bleu(**settings)
