"""GLUE as text-to-text (Raffel et al. 2020, §2.4): inputs "<task> <field>: <text>", label names
(STS-B: the score rounded to 0.2) as targets; generated texts scored against the label set, a text
outside it counted wrong; a T5 run's row on the GLUE board beside an encoder's, and a mixture
run's on the multitask board."""

import csv
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from sklearn.metrics import f1_score, matthews_corrcoef

from bench.boards.table import build_table
from bench.record import iter_records
from bench.run.execute import CONF_DIR, execute, normalize, resolve_target
from datamodules.glue_text import GlueTextDataModule, vocabulary_corpus
from datamodules.tokenization import train_tokenizer
from lit_models.archs import get_arch
from lit_models.families.text_to_text import LabelScorer, text_task

QUICK = ["task.max_train_samples=16", "task.max_eval_samples=6", "trainer.max_steps=1",
         "trainer.enable_progress_bar=false"]


def task_config(name: str, *overrides: str):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"task={name}", *overrides])
    resolve_target(cfg)  # a task's target, as a run resolves it before its checks
    normalize(cfg)
    return cfg


@pytest.mark.parametrize("name", ["glue/sst2", "glue/mrpc", "glue/stsb"])
def test_glue_rows_read_as_text(name, mirror):
    task = task_config(name, "task.max_train_samples=60").task
    _, corpus = vocabulary_corpus(task)  # inputs and label texts: the vocabulary spells them
    tokenizer = train_tokenizer(get_arch("t5").tokenizer, corpus, vocab_size=400,
                                lowercase=False)
    task.splits.train, task.max_eval_samples = None, 4
    dm = GlueTextDataModule(text_task(task, tokenizer), tokenizer, decoder_start_token_id=0)
    dm.setup("fit")
    texts, fields = dm.texts["validation"], list(task.text_fields)
    config = task.config
    prefix = f"{config} {fields[0]}: "
    assert all(source.startswith(prefix) for source in texts["source"])
    if len(fields) == 2:
        assert all(f" {fields[1]}: " in source for source in texts["source"])
    example = dm.eval_data[0][0]
    target = tokenizer.backend.decode(example["labels"], skip_special_tokens=True)
    reference = texts["reference"][0]
    if task.num_labels == 1:  # the score rounded to 0.2 as the target, unrounded as reference
        assert target == f"{round(float(reference) * 5) / 5:.1f}"
    else:
        assert reference in task.label_names and target == reference
    assert example["labels"][-1] == tokenizer.special.sep
    assert example["decoder_input_ids"] == [0, *example["labels"][:-1]]


def test_texts_outside_the_label_set_count_as_wrong():
    scorer = LabelScorer(["not_equivalent", "equivalent"], ["accuracy", "f1", "matthews"], 2)
    predictions = ["equivalent", "equivalent", "not_equivalent", "maybe", "", "equivalent"]
    references = ["equivalent", "not_equivalent", "not_equivalent", "equivalent",
                  "not_equivalent", "equivalent"]
    scorer.update(references[:3], texts=predictions[:3])
    scorer.update(references[3:], texts=predictions[3:])
    scores = scorer.compute()
    gold = torch.tensor([1, 0, 0, 1, 0, 1])
    as_read = torch.tensor([1, 1, 0, 0, 1, 1])  # "maybe" and "" read as the other label
    assert scores["accuracy"] == pytest.approx(3 / 6)
    assert scores["f1"] == pytest.approx(f1_score(gold, as_read))
    assert scores["f1"] == pytest.approx(2 * 2 / (2 * 2 + 2 + 1))  # tp 2, fp 2 ("" too), fn 1
    assert scores["matthews"] == pytest.approx(matthews_corrcoef(gold, as_read))
    assert scores["invalid"] == pytest.approx(2 / 6)
    regression = LabelScorer(["score"], ["pearson"], 1)
    regression.update(["1.1", "2.3", "3.2", "3.9"], texts=["1.0", "2.0", "x", "4.0"])
    expected = torch.corrcoef(torch.tensor([[1.0, 2.0, -1.0, 4.0], [1.1, 2.3, 3.2, 3.9]]))[0, 1]
    values = regression.compute()
    assert values["pearson"] == pytest.approx(expected.item(), abs=1e-6)
    assert values["invalid"] == pytest.approx(0.25)


def run(results: Path, model: str, task: str, *overrides: str) -> dict:
    cfg = task_config(task, f"model={model}", *QUICK, f"results_dir={results}", *overrides)
    return execute(cfg, results / task / model).to_dict()


def test_t5_reports_to_the_glue_board_beside_an_encoder(mirror, tmp_path):
    t5 = run(tmp_path, "t5-tiny-scratch", "glue/rte")
    assert t5["status"] == "ok" and {"accuracy", "invalid"} <= set(t5["metrics"]["validation"])
    # the GLUE schema of the encoders' runs, its accuracy the record's (invalid texts: wrong)
    with (Path(t5["run_dir"]) / t5["predictions"]["validation"]).open(newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert list(rows[0]) == ["index", "prediction", "label"]
    assert {row["label"] for row in rows} <= {"entailment", "not_entailment"}
    correct = sum(row["prediction"] == row["label"] for row in rows) / len(rows)
    assert t5["metrics"]["validation"]["accuracy"] == pytest.approx(correct)
    assert run(tmp_path, "bert-tiny-scratch", "glue/rte")["status"] == "ok"
    table = build_table(iter_records(tmp_path), "glue")
    assert sorted(row.label for row in table.rows if row.score is not None) == ["bert-tiny-scratch",
                                                                              "t5-tiny-scratch"]
    mixture = run(tmp_path, "t5-tiny-scratch", "mixture/glue", "task.splits.eval=[rte:validation,"
                  "sst2:validation]", "task.mixing.temperature=2.0")
    assert set(mixture["metrics"]) == {"rte:validation", "sst2:validation"}
    assert set(mixture["predictions"]) == {"rte:validation", "sst2:validation"}
    board = build_table(iter_records(tmp_path), "multitask")
    assert [row.label for row in board.rows] == ["t5-tiny-scratch"]
