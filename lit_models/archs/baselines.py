"""The model families before and beside fine-tuned Transformers (issue 23; ``docs/baselines.md``):
registered by name and kind only, since their task families build their nets
(``lit_models/families/word_vectors.py``, ``bilm.py``, ``bilstm.py``)."""

from lit_models.archs.spec import Baseline

WORD2VEC = Baseline("word2vec", "word-vectors",
                    "word2vec skip-gram / CBOW, negative sampling (Mikolov et al. 2013): gensim")
GLOVE = Baseline("glove", "word-vectors",
                 "GloVe's weighted least squares over co-occurrences (Pennington et al. 2014)")
ELMO = Baseline("elmo", "bilm",
                "ELMo's character-CNN biLSTM language model (Peters et al. 2018)")
BILSTM = Baseline("bilstm", "bilstm",
                  "the GLUE baselines' BiLSTM task models (Wang et al. 2019, §5)")

BASELINES = (WORD2VEC, GLOVE, ELMO, BILSTM)
