"""Fine-tuned classifiers in and out: a run with save_model=true exports a Hugging Face
BertForSequenceClassification that transformers scores exactly as the run did, and a task
without a training split (GLUE AX) is predicted by a fine-tuned checkpoint into GLUE-format
files that match transformers' predictions."""

import csv
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch

from tests.bench.invoke import plmbench, read, run_dir
from tests.conftest import require

transformers = require("transformers")

TINY = [
    "model=bert-tiny-scratch", "task.max_train_samples=64", "task.max_eval_samples=32",
    "trainer.max_steps=4", "trainer.enable_progress_bar=false",
]


def logits_with_transformers(model_dir: Path, rows: list[dict], fields: list[str]) -> torch.Tensor:
    """Logits by transformers' own model and tokenizer (truncated to 128 like the task)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    texts = [[row[f] for row in rows] for f in fields]
    inputs = tokenizer(*texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        return model(**inputs).logits


def predict_with_transformers(model_dir: Path, rows: list[dict], fields: list[str]) -> list[int]:
    return logits_with_transformers(model_dir, rows, fields).argmax(-1).tolist()


def test_save_model_exports_a_classifier_transformers_scores_the_same(mirror, tmp_path):
    results = tmp_path / "results"
    done = plmbench("run", *TINY, "task=glue/rte", "save_model=true", f"results_dir={results}")
    assert done.rc == 0, done.err
    where = run_dir(results, "glue/rte", *TINY, "save_model=true")
    config = json.loads((where / "model/config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["id2label"] == {"0": "entailment", "1": "not_entailment"}
    rows = pq.read_table(mirror / "glue/rte/validation.parquet").to_pylist()[:32]
    predicted = predict_with_transformers(where / "model", rows, ["sentence1", "sentence2"])
    accuracy = sum(p == row["label"] for p, row in zip(predicted, rows, strict=True)) / 32
    assert read(where)["metrics"]["validation"]["accuracy"] == pytest.approx(accuracy)


#: an MNLI checkpoint's classes in another order than the task's, named in other cases
CHECKPOINT_LABELS = {0: "CONTRADICTION", 1: "Neutral", 2: "entailment"}


def test_ax_is_predicted_by_a_fine_tuned_checkpoint(mirror, minilm_path, tmp_path):
    """A random 3-label BertForSequenceClassification stands in for an MNLI model (MNLI is not
    in the offline mirror), its classes in the order contradiction / neutral / entailment; its
    predictions through plmbench equal transformers' own, row by row, by the label's name."""
    checkpoint = tmp_path / "mnli-classifier"
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, num_labels=3,
                                     id2label=CHECKPOINT_LABELS,
                                     label2id={v: k for k, v in CHECKPOINT_LABELS.items()})
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    model.save_pretrained(checkpoint)
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json"):
        shutil.copy(minilm_path / name, checkpoint / name)
    rows = pq.read_table(mirror / "glue/ax/test.parquet").to_pylist()[:40]
    # a random BERT's pooled outputs barely differ between inputs: centre the head's logits on
    # these rows, so the differences decide the class and several classes occur
    logits = logits_with_transformers(checkpoint, rows, ["premise", "hypothesis"])
    with torch.no_grad():
        model.classifier.weight.mul_(1e3)
        model.classifier.bias.copy_(-1e3 * logits.mean(0))
    model.save_pretrained(checkpoint)

    results = tmp_path / "results"
    overrides = ["task.max_eval_samples=40", f"init_from=hf:{checkpoint}",
                 "trainer.enable_progress_bar=false"]
    done = plmbench("run", "task=glue/ax", *overrides, f"results_dir={results}")
    assert done.rc == 0, done.err
    where = run_dir(results, "glue/ax", *overrides)
    record = read(where)
    assert record["status"] == "ok" and record["predictions"] == {"test": "predictions/test.tsv"}
    with (where / "predictions/test.tsv").open(newline="") as handle:
        written = list(csv.DictReader(handle, delimiter="\t"))
    assert [int(row["index"]) for row in written] == list(range(40))
    expected = predict_with_transformers(checkpoint, rows, ["premise", "hypothesis"])
    assert [row["prediction"] for row in written] == [CHECKPOINT_LABELS[i].lower()
                                                      for i in expected]
    assert {0, 2} <= set(expected)  # entailment and contradiction, which a wrong order swaps


def test_ax_from_a_checkpoint_with_unnamed_classes_is_refused(mirror, minilm_path, tmp_path):
    """transformers' LABEL_0.. say nothing about which class is which: one line naming the
    setting that names them (``tests/lit_models/core/test_labels.py`` follows it)."""
    checkpoint = tmp_path / "unnamed"
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64, num_labels=3)
    torch.manual_seed(0)
    transformers.BertForSequenceClassification(config).save_pretrained(checkpoint)
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json"):
        shutil.copy(minilm_path / name, checkpoint / name)
    overrides = ["task=glue/ax", "task.max_eval_samples=8", f"init_from=hf:{checkpoint}",
                 "trainer.enable_progress_bar=false", f"results_dir={tmp_path / 'results'}"]
    refused = plmbench("run", *overrides)
    assert refused.rc == 2 and len(refused.err_lines) == 1
    assert "unnamed (LABEL_0, LABEL_1, LABEL_2)" in refused.err
    assert "task.checkpoint_labels" in refused.err


def test_ax_without_a_fine_tuned_head_is_refused(mirror, tmp_path):
    done = plmbench("run", "task=glue/ax", "trainer.enable_progress_bar=false",
                    f"results_dir={tmp_path}")
    assert done.rc == 2
    assert "no training split, so init_from must be a classifier fine-tuned with 3 labels" in (
        done.err)


def read_tsv(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


@pytest.fixture(scope="module")
def dev_runs(tmp_path_factory):
    """One tiny fine-tuning run per kind of GLUE label: MRPC (0/1), RTE (names), STS-B
    (scores), each evaluated on its first 48 dev rows."""
    from tests.bench.invoke import plmbench_on_mirror

    overrides = [*TINY[:2], "task.max_eval_samples=48", *TINY[3:]]
    runs = {}
    for task in ("glue/mrpc", "glue/rte", "glue/stsb"):
        done, results = plmbench_on_mirror(tmp_path_factory, "glue", "run", f"task={task}",
                                           *overrides)
        assert done.rc == 0, done.err
        runs[task] = run_dir(results, task, *overrides)
    return runs


@pytest.mark.parametrize("task, vocabulary", [("glue/mrpc", {"0", "1"}),
                                              ("glue/rte", {"entailment", "not_entailment"})])
def test_dev_predictions_are_glue_submission_rows_with_gold_labels(dev_runs, mirror, task,
                                                                   vocabulary):
    """predictions/validation.tsv: index, prediction and gold label in GLUE's vocabulary, one
    row per dev example in order, from which scikit-learn recomputes the record's metrics."""
    sklearn = require("sklearn.metrics")
    where = dev_runs[task]
    record = read(where)
    assert record["predictions"] == {"validation": "predictions/validation.tsv"}
    rows = read_tsv(where / "predictions/validation.tsv")
    assert list(rows[0]) == ["index", "prediction", "label"]
    assert [int(row["index"]) for row in rows] == list(range(48))
    assert {row["prediction"] for row in rows} <= vocabulary
    config = task.split("/")[1]
    gold = pq.read_table(mirror / f"glue/{config}/validation.parquet").column("label")
    names = sorted(vocabulary) if task == "glue/mrpc" else ["entailment", "not_entailment"]
    assert [row["label"] for row in rows] == [names[y] for y in gold.to_pylist()[:48]]
    predicted = [row["prediction"] for row in rows]
    expected = {"accuracy": sklearn.accuracy_score([r["label"] for r in rows], predicted)}
    if task == "glue/mrpc":
        expected["f1"] = sklearn.f1_score([r["label"] for r in rows], predicted, pos_label="1")
    assert record["metrics"]["validation"] == pytest.approx(expected)


def test_stsb_predictions_are_scores_whose_correlations_are_the_records(dev_runs, mirror):
    stats = require("scipy.stats")
    where = dev_runs["glue/stsb"]
    rows = read_tsv(where / "predictions/validation.tsv")
    gold = pq.read_table(mirror / "glue/stsb/validation.parquet").column("label").to_pylist()
    assert [float(row["label"]) for row in rows] == pytest.approx(gold[:48])
    assert rows[0]["label"] == "5.0"  # the shortest text of the float32 score
    predicted = [float(row["prediction"]) for row in rows]
    metrics = read(where)["metrics"]["validation"]
    assert metrics["pearson"] == pytest.approx(stats.pearsonr(predicted, gold[:48])[0], abs=1e-5)
    assert metrics["spearman"] == pytest.approx(stats.spearmanr(predicted, gold[:48])[0],
                                                abs=1e-5)
