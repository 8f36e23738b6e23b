"""Static word vectors on a corpus: word2vec through gensim (``word2vec.py``) or GloVe in torch
(``glove.py``), scored intrinsically at every validation (``lit_models/core/word_vectors.py``) and
written to ``<run dir>/model/vectors.txt`` in word2vec's text format.

``WordVectors`` is the task family of ``conf/task/embeddings/*`` for the ``word-vectors`` kind.
The vocabulary is the corpus's most frequent words (``model.max_vocab``, at least
``model.min_count`` occurrences, ``model.lowercase``), cached by the corpus's fingerprint; the
record's ``outputs.neighbours`` lists the nearest neighbours of the task's query words.
"""

from collections.abc import Mapping

from datamodules import pretrain, word_vectors
from datamodules.errors import PlmbenchError
from datamodules.init_from import EXPORT_DIR, InitFrom
from datamodules.words import cached_vocabulary
from lit_models.archs import Model
from lit_models.core.family import TaskFamily
from lit_models.core.word_vectors import save_vectors
from lit_models.families.glove import LitGlove, build_glove
from lit_models.families.word2vec import LitWord2Vec, build_word2vec


class WordVectors(TaskFamily):
    kinds = ("word-vectors",)

    def vocabulary_corpus(self, task):
        """(a key, the sentences, read lazily) of the corpus's capped training split."""
        return pretrain.vocabulary_corpus(word_vectors.checked_task(task))

    def build_net(self, cfg: Mapping, arch, init_from: InitFrom) -> Model:
        model, task = cfg["model"], cfg["task"]
        key, _ = self.vocabulary_corpus(task)  # the key: cached vocabularies skip the counting
        vocab = cached_vocabulary(key, lambda: self.vocabulary_corpus(task)[1],
                                  model["max_vocab"], model["min_count"], model["lowercase"])
        if model["arch"] == "glove":
            return Model(arch, build_glove(model, vocab), vocab)
        if cfg["trainer"]["accelerator"] not in ("cpu", "auto"):
            raise PlmbenchError(f"model={model['name']}: word2vec trains on CPU threads "
                                "(gensim; model.workers); use trainer=cpu")
        trainer = cfg["trainer"]
        if trainer.get("devices", 1) not in (1, "1") or trainer.get("num_nodes", 1) != 1:
            raise PlmbenchError(f"model={model['name']}: word2vec trains in one process (gensim's "
                                "threads: model.workers), whose vectors no other process shares; "
                                "use trainer=cpu with trainer.devices=1")
        return Model(arch, build_word2vec(model, vocab, cfg["seed"]), vocab)

    def build(self, cfg, model: Model, init_from: InitFrom):
        task, (_, net, vocab) = cfg["task"], model
        module_class = LitGlove if cfg["model"]["arch"] == "glove" else LitWord2Vec
        dm = word_vectors.WordVectorsDataModule(task, vocab, module_class.examples,
                                                cfg["model"].get("window", 10), cfg["seed"])
        dm.setup("fit")  # the word sets' sizes and kinds, for the module's metrics
        module = module_class(net, vocab, task["intrinsic"], dm.eval_split_names, dm.set_kinds,
                              dm.set_sizes, cfg["optim"])
        return module, dm

    def export(self, module, model, run_dir, cfg) -> None:
        """The vectors are what the run makes: always written."""
        save_vectors(module.vocab, module.vectors(), run_dir / EXPORT_DIR,
                     binary=cfg["model"].get("binary", False))
