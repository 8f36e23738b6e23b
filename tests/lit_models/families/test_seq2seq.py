"""Tiny end-to-end BART and T5 runs on CPU: denoising (BART) or span-corruption (T5) pretraining ->
summarization fine-tuning from that checkpoint -> generation -> ROUGE, leaving records,
predictions files whose ROUGE recomputes to the recorded values, and a summarization leaderboard
row with the generation settings."""

import json
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from torchmetrics.text.rouge import ROUGEScore

from bench.boards.table import build_table
from bench.boards.text import render_markdown
from bench.example_outputs import read_outputs
from bench.record import iter_records
from bench.run.execute import CONF_DIR, execute, normalize, resolve_target
from datamodules.summarization import SummarizationDataModule
from datamodules.tokenization import train_tokenizer
from lit_models.archs import get_arch
from lit_models.metrics.rouge import Rouge

QUICK = ["trainer.max_steps=2", "trainer.enable_progress_bar=false", "task.max_eval_samples=6"]


def run(results: Path, model: str, *overrides: str) -> dict:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"model={model}", *QUICK, *overrides,
                                           f"results_dir={results}"])
    resolve_target(cfg)  # a task's target, as a run resolves it before its checks
    normalize(cfg)
    return execute(cfg, results / cfg.task.name).to_dict()


@pytest.mark.parametrize(("model", "objective"), [("bart-tiny-scratch", "denoising"),
                                                  ("t5-tiny-scratch", "span_corruption")])
def test_pretrain_fine_tune_generate_score(model, objective, mirror, tmp_path):
    pretrained = run(tmp_path, model, "task=pretrain/wikitext", f"objective={objective}",
                     "task.splits.train=test", "task.max_train_samples=20")
    assert pretrained["status"] == "ok"
    assert {f"{objective}_loss", "perplexity"} <= set(pretrained["metrics"]["validation"])
    checkpoint = Path(pretrained["run_dir"])
    assert (checkpoint / "model" / "config.json").is_file()

    record = run(tmp_path, model, "task=summarization/aeslc", f"init_from=ckpt:{checkpoint}",
                 "task.max_train_samples=16", "task.generation.num_beams=2",
                 "task.generation.max_new_tokens=8", "task.generation.min_new_tokens=3")
    assert record["status"] == "ok" and record["init_from"].startswith("ckpt:")
    assert record["config"]["task"]["generation"]["num_beams"] == 2
    scores = record["metrics"]["validation"]
    predictions = Path(record["run_dir"]) / record["predictions"]["validation"]
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert len(rows) == 6 and all(set(r) == {"id", "source", "prediction", "reference"}
                                  for r in rows)
    assert all(r["prediction"] for r in rows)  # min_new_tokens forces some text
    prefix = "summarize: " if model.startswith("t5") else ""  # T5's task prefix, from its preset
    assert all(r["source"].startswith(prefix) for r in rows)
    # recomputed from the file alone: torchmetrics directly for ROUGE-1/2/L, ours for Lsum
    predicted, references = [r["prediction"] for r in rows], [r["reference"] for r in rows]
    direct = ROUGEScore(use_stemmer=True, rouge_keys=("rouge1", "rouge2", "rougeL"))(
        predicted, references)
    for key in ("rouge1", "rouge2", "rougeL"):
        assert scores[key] == pytest.approx(float(direct[f"{key}_fmeasure"]), abs=1e-6)
    ours = Rouge()
    ours.update(predicted, references)
    assert scores["rougeLsum"] == pytest.approx(float(ours.compute()["rougeLsum"]), abs=1e-6)

    # the paired bootstrap's per-example scores give back the recorded metrics on all rows
    outputs = read_outputs(record, "validation")
    every = np.arange(len(outputs.ids))[None, :]
    for key in ("rouge1", "rouge2", "rougeL", "rougeLsum"):
        assert outputs.metric(key, every)[0] == pytest.approx(scores[key], abs=1e-6)

    table = build_table(iter_records(tmp_path), "summarization")
    assert [row.label for row in table.rows] == [model]
    markdown = render_markdown(table)
    assert "summarization/aeslc R-1" in markdown and "summarization/aeslc beams" in markdown


def test_summarization_examples_are_teacher_forced(mirror):
    """Labels are the target with the template's specials, decoder inputs the labels shifted
    right after the decoder start token; texts keep the raw rows for ROUGE."""
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        task = compose("config", overrides=["task=summarization/dialogsum"]).task
    tokenizer = train_tokenizer(get_arch("bart").tokenizer, ["#Person1#: hello there."] * 50,
                                vocab_size=300, lowercase=False)
    task.splits.train, task.splits.eval = None, ["validation"]
    task.max_eval_samples, task.source_max_length, task.target_max_length = 3, 20, 9
    dm = SummarizationDataModule(task, tokenizer, decoder_start_token_id=2)
    dm.setup("fit")
    example = dm.eval_data[0][1]
    special = tokenizer.special
    assert len(example["input_ids"]) == 20 and len(example["labels"]) <= 9
    assert example["labels"][0] == special.cls and example["labels"][-1] == special.sep
    assert example["decoder_input_ids"] == [2, *example["labels"][:-1]]
    assert dm.texts["validation"]["id"][:2] == ["dev_0", "dev_1"]
    batch = dm.val_dataloader()[0].collate_fn([dm.eval_data[0][i] for i in range(3)])
    assert batch["index"].tolist() == [0, 1, 2]
