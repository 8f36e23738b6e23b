"""Held-out evaluation on several corpora (lit_models/families/corpus_evaluation.py): a checkpoint
without
pretraining heads gets vocabulary figures and no loss; the corpora take the evaluation's caps."""

from hydra import compose, initialize_config_dir

from bench.run.execute import CONF_DIR, execute, normalize, resolve_target
from lit_models.families.corpus_evaluation import corpus_task
from lit_models.interop.hf import has_pretraining_heads


def test_a_sentence_encoder_gets_vocabulary_figures_and_no_loss(mirror, minilm_path, tmp_path):
    assert not has_pretraining_heads(minilm_path)  # all-MiniLM-L6-v2 ships BertModel only
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[
            "model=minilm-l6", "task=perplexity/domains", "task.splits.eval=[cs]",
            "task.max_train_samples=12", "task.eval_documents=2",
            f"task.vocabulary_reference=hf:{minilm_path}", "trainer.enable_progress_bar=false"])
    resolve_target(cfg)  # a task's target, as a run resolves it before its checks
    normalize(cfg)
    record = execute(cfg, tmp_path / "run").to_dict()
    assert record["status"] == "ok" and record["steps"] == 0
    assert set(record["metrics"]) == {"cs", "vocabulary"}
    assert set(record["metrics"]["cs"]) == {"subtokens_per_word"}  # no loss of a random head
    assert 1 < record["metrics"]["cs"]["subtokens_per_word"] < 2
    assert record["metrics"]["vocabulary"] == {"size": 30522 - 5, "overlap": 1.0}
    assert not (tmp_path / "run" / "model").exists()  # nothing trained, nothing exported


def test_every_corpus_takes_the_evaluations_caps():
    task = {"name": "perplexity/x", "max_train_samples": 40, "eval_documents": 4,
            "max_length": 64, "max_eval_samples": None,
            "corpora": {"pubmed": {"name": "pretrain/pubmed", "eval_documents": 200,
                                   "max_length": 128, "splits": {"train": "train",
                                                                 "eval": ["heldout"]}}}}
    corpus = corpus_task(task, "pubmed")
    assert corpus["max_train_samples"] == 40 and corpus["eval_documents"] == 4
    assert corpus["max_length"] == 64 and corpus["heldout_of"] == "train"
    assert corpus["splits"] == {"train": None, "eval": ["heldout"]}
    uncapped = corpus_task({**task, "eval_documents": None}, "pubmed")
    assert uncapped["eval_documents"] == 200  # the corpus's own where the evaluation sets none
