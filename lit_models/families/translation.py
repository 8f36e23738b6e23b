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

from datamodules import translation
from lit_models.families.seq2seq import Seq2Seq


class Translation(Seq2Seq):
    """Source sentence -> target sentence; the task names its metrics (``bleu``) and sacreBLEU's
    settings (``task.bleu``)."""

    data = translation.TranslationDataModule
    corpus = staticmethod(translation.vocabulary_corpus)
