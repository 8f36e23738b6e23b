"""Every preset of the models before fine-tuning runs end to end at tiny size (its own settings,
its sizes shrunk): the word-vector presets on 200 Wikipedia articles, the biLMs on a few more,
the BiLSTMs on capped RTE; each leaves an ok record of the preset with its metrics."""

import pytest

from bench.run.execute import CONF_DIR
from tests.bench.invoke import plmbench_on_mirror, read, records_under

TINY = ["trainer.max_steps=2", "trainer.enable_progress_bar=false"]
#: the word vectors read 200 articles, so that every word set has items among the words seen the
#: presets' 5 times (fewer: the run is refused, no score is defined on no item)
SHRUNK = {
    "word2vec": ["task=embeddings/wikipedia", "task.max_train_samples=200", "model.vector_size=8"],
    "glove": ["task=embeddings/wikipedia", "task.max_train_samples=200", "model.vector_size=8",
              "model.window=3"],
    "elmo": ["task=pretrain/wikipedia", "task.max_train_samples=16", "task.eval_documents=4",
             "task.max_length=16",
             "model.char_filters=[[1,4],[2,4]]", "model.projection_dim=8", "model.cell_dim=16",
             "model.vocab_size=500", "task.batch_size=4"],
    "bilstm": ["task=glue/rte", "task.max_train_samples=16", "task.max_eval_samples=8",
               "model.hidden_size=8", "model.classifier_hidden=8", "model.inputs.embedding_dim=8"],
}
PRESETS = sorted(
    (path.stem, arch) for path in (CONF_DIR / "model").glob("*.yaml")
    for arch in SHRUNK if path.stem.startswith(("word2vec", "glove", "elmo", "bilstm"))
    and path.stem.split("-")[0] == arch and not path.stem.endswith("-tiny"))


def test_every_baseline_preset_is_here():
    assert {name for name, _ in PRESETS} == {
        "word2vec-sgns", "word2vec-cbow", "glove-300d", "elmo-original", "elmo-small",
        "bilstm-glue", "bilstm-small"}


@pytest.mark.parametrize(("preset", "arch"), PRESETS)
def test_the_preset_runs_at_tiny_size(preset, arch, tmp_path_factory):
    dataset = "glue" if arch == "bilstm" else "wikipedia_en_sample"
    result, results = plmbench_on_mirror(tmp_path_factory, dataset, "run", f"model={preset}",
                                         *SHRUNK[arch], *TINY)
    assert result.rc == 0, result.err[-2000:]
    [path] = records_under(results)
    record = read(path.parent)
    assert record["status"] == "ok" and record["model"] == preset and record["steps"] == 2
    assert record["metrics"]
