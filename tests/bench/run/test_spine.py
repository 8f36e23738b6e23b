"""What a new user hit before the spine opened (issue: sweeps that reuse a stale result, the
Wikipedia pretraining crash, a string eval split, checkpoint sizes in the record, a new task YAML
that never reached the leaderboard), each through the ``plmbench`` command as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.invoke import plmbench, read, records_under, reset_cli_state, run_dir

TINY = ["model=bert-tiny-scratch", "task.max_train_samples=48", "task.max_eval_samples=16",
        "trainer.max_steps=2", "trainer.enable_progress_bar=false"]


@pytest.fixture(autouse=True)
def clean_cli_state():
    reset_cli_state()
    yield
    reset_cli_state()


@pytest.fixture
def env(mirror, monkeypatch, tmp_path) -> Path:
    monkeypatch.setenv("PLMBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "results"


def test_a_sweep_over_a_learning_rate_leaves_one_record_per_value(env):
    result = plmbench("run", "-m", *TINY, "task=glue/rte", "optim.lr=2e-4,3e-4",
                      f"results_dir={env}")
    assert result.rc == 0, result.err
    records = [json.loads(p.read_text()) for p in records_under(env)]
    assert sorted(r["config"]["optim"]["lr"] for r in records) == [2e-4, 3e-4]
    assert len({r["config_hash"] for r in records}) == 2
    variants = {Path(r["run_dir"]).parent.name for r in records}
    assert len(variants) == 2 and all(v.startswith("optim.lr:") for v in variants)
    assert all(r["overrides"] for r in records)


def test_the_same_config_is_skipped_and_a_changed_one_never_reuses_the_record(env, tmp_path):
    args = ["run", *TINY, "task=glue/rte", f"results_dir={env}"]
    assert plmbench(*args).rc == 0
    where = run_dir(env, "glue/rte", *TINY)
    first = read(where)
    assert plmbench(*args).rc == 0
    assert read(where)["run_id"] == first["run_id"]  # skipped: same config hash
    # the same path, another configuration (an edited experiment file, say): never reused, and
    # never overwritten without being asked
    record = dict(first, config_hash="0" * 16)
    (where / "record.json").write_text(json.dumps(record))
    refused = plmbench(*args)
    assert refused.rc == 2
    assert len(refused.err_lines) == 1 and "another configuration" in refused.err_lines[0]
    assert "skip_completed=false" in refused.err_lines[0]
    assert read(where)["config_hash"] == "0" * 16  # untouched
    replaced = plmbench(*args, "skip_completed=false")
    assert replaced.rc == 0
    again = read(where)
    assert again["config_hash"] == first["config_hash"] and again["run_id"] != first["run_id"]


def test_wikipedia_pretraining_evaluates_its_held_out_articles(env):
    result = plmbench("run", "model=bert-tiny-scratch", "task=pretrain/wikipedia",
                      "task.max_train_samples=30", "task.eval_documents=5",
                      "task.max_eval_samples=5", "trainer.max_steps=2",
                      "trainer.enable_progress_bar=false", f"results_dir={env}")
    assert result.rc == 0, result.err
    (path,) = records_under(env)
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and set(record["metrics"]) == {"heldout"}
    assert record["metrics"]["heldout"]["mlm_loss"] > 0
    assert record["config"]["task"]["splits"]["eval"] == ["heldout"]


def test_too_few_wikipedia_articles_for_the_held_out_split_is_one_line(env):
    result = plmbench("run", "model=bert-tiny-scratch", "task=pretrain/wikipedia",
                      "task.max_train_samples=50", "trainer.max_steps=2", f"results_dir={env}")
    assert result.rc == 2
    (line,) = [line for line in result.err_lines if line.startswith("error:")]
    assert "eval_documents=200" in line and "task.max_train_samples" in line
    assert not any("Trainer" in line or "Traceback" in line for line in result.err_lines)
    (path,) = records_under(env)
    assert json.loads(path.read_text())["status"] == "failed"


def test_a_string_eval_split_is_one_split(env):
    overrides = [*TINY, "task=glue/sst2", "task.splits.eval=validation"]
    result = plmbench("run", *overrides, f"results_dir={env}")
    assert result.rc == 0, result.err
    (path,) = records_under(env)
    record = json.loads(path.read_text())
    assert set(record["metrics"]) == {"validation"}
    assert record["config"]["task"]["splits"]["eval"] == ["validation"]


def test_the_record_holds_the_checkpoints_sizes_not_the_presets(env, minilm_path):
    result = plmbench("run", *TINY[1:], "model=bert-base-scratch", f"init_from=hf:{minilm_path}",
                      "task=glue/rte", f"results_dir={env}")
    assert result.rc == 0, result.err
    (path,) = records_under(env)
    model = json.loads(path.read_text())["config"]["model"]
    checkpoint = json.loads((minilm_path / "config.json").read_text())
    for key in ("hidden_size", "num_hidden_layers", "intermediate_size", "vocab_size"):
        assert model[key] == checkpoint[key]
    assert model["name"] == "bert-base-scratch" and model["arch"] == "bert"


def test_a_checkpoint_of_another_architecture_is_refused_in_one_line(env, minilm_path):
    result = plmbench("run", *TINY[1:], "model=roberta-tiny-scratch", f"init_from=hf:{minilm_path}",
                      "task=glue/rte", f"results_dir={env}")
    assert result.rc == 2
    (line,) = result.err_lines
    assert "bert checkpoint" in line and "roberta" in line


def test_a_new_glue_style_task_yaml_reaches_the_leaderboard(env, tmp_path):
    """The README's "Extending" recipe: one YAML, no Python; here RTE under another name."""
    conf = tmp_path / "myconf"
    (conf / "task" / "glue").mkdir(parents=True)
    (conf / "task" / "glue" / "myrte.yaml").write_text(
        "defaults:\n  - /task/glue/_base@_here_\n  - _self_\nname: glue/myrte\nconfig: rte\n"
        "text_fields: [sentence1, sentence2]\nnum_labels: 2\nlabel_names: [yes, no]\n"
        "metrics: [accuracy, f1]\n")
    result = plmbench("run", *TINY, "task=glue/myrte", f"hydra.searchpath=[file://{conf}]",
                      f"results_dir={env}")
    assert result.rc == 0, result.err
    (path,) = records_under(env)
    metrics = json.loads(path.read_text())["metrics"]["validation"]
    board = plmbench("leaderboard", str(env))
    assert board.rc == 0, board.err
    assert "glue/myrte" in board.out
    assert f"{100 * metrics['accuracy']:.1f}" in board.out


def test_nsp_with_an_architecture_without_its_head_is_one_line(env):
    result = plmbench(
        "run",
        "model=roberta-tiny-scratch",
        "task=pretrain/wikitext",
        "objective=mlm_nsp",
        "task.splits.train=test",
        "task.max_train_samples=4",
        f"results_dir={env}",
    )
    assert result.rc == 2
    (line,) = [line for line in result.err_lines if line.startswith("error:")]
    assert "next-sentence-prediction head" in line and "leave objective= out" in line


def test_roberta_pretrains_then_fine_tunes_from_its_export(env):
    """The same modules as BERT: MLM on FULL-SENTENCES with a byte-level BPE vocabulary, the
    export loaded back for GLUE with its classification head."""
    pretrain = ["model=roberta-tiny-scratch", "task=pretrain/wikitext", "task.splits.train=test",
                "task.max_train_samples=4", "task.max_eval_samples=2", "trainer.max_steps=2"]
    assert plmbench("run", *pretrain, f"results_dir={env}").rc == 0
    pretrained = run_dir(env, "pretrain/wikitext", *pretrain, label="roberta-tiny-scratch")
    exported = json.loads((pretrained / "model/config.json").read_text())
    assert exported["model_type"] == "roberta"
    assert exported["architectures"] == ["RobertaForMaskedLM"]
    assert json.loads((pretrained / "model/tokenizer_config.json").read_text())[
        "tokenizer_class"] == "RobertaTokenizerFast"
    finetune = ["model=roberta-tiny-scratch", "task=glue/rte", f"init_from=ckpt:{pretrained}",
                "task.max_train_samples=32", "task.max_eval_samples=16", "trainer.max_steps=2",
                "save_model=true"]
    result = plmbench("run", *finetune, f"results_dir={env}")
    assert result.rc == 0, result.err
    record = read(run_dir(env, "glue/rte", *finetune, label="roberta-tiny-scratch"))
    assert record["config"]["model"]["vocab_size"] == exported["vocab_size"]
    assert record["config"]["model"]["arch"] == "roberta"
    saved = json.loads((Path(record["run_dir"]) / "model/config.json").read_text())
    assert saved["architectures"] == ["RobertaForSequenceClassification"]
