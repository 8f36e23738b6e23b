"""A tagging run's export and REALM's tagger entity finder: a bert-tiny-scratch tagger trained a few
steps on NCBI-disease exports as transformers' *ForTokenClassification with equal logits; a run
from that export with no training scores exactly as the run that trained it; ``TaggerEntities``
gives exactly the entities of the run's own word predictions, at any batch size; Hydra builds it
from the ssm objective's config and a tiny ssm pretraining run with it leaves a record; a
checkpoint that is no tagger ends in one line."""

import json

import hydra
import pytest
import torch
from hydra import compose, initialize_config_dir
from safetensors.torch import load_file

from bench.run.execute import CONF_DIR
from datamodules.errors import PlmbenchError
from lit_models.families.entity_tagger import TaggerEntities
from lit_models.interop.hf import task_labels
from tests.bench.invoke import plmbench, plmbench_on_mirror, read, run_dir
from tests.bench.run.test_smoke import assert_tagger_export_scores_as_transformers

TAGS = ["O", "B-Disease", "I-Disease"]
TINY = ["model=bert-tiny-scratch", "task=ner/ncbi_disease", "task.max_train_samples=64",
        "task.max_eval_samples=24", "trainer.enable_progress_bar=false"]
TRAINED = [*TINY, "trainer.max_steps=3", "save_model=true"]


@pytest.fixture(scope="module")
def tagger(tmp_path_factory) -> dict:
    """A bert-tiny-scratch NCBI-disease tagger run with its export: {"results", "run"}."""
    done, results = plmbench_on_mirror(tmp_path_factory, "ncbi_disease", "run", *TRAINED)
    assert done.rc == 0, done.err
    return {"results": results, "run": run_dir(results, "ner/ncbi_disease", *TRAINED[1:])}


def test_export_scores_as_transformers(tagger):
    export = tagger["run"] / "model"
    assert json.loads((export / "config.json").read_text())["architectures"] == [
        "BertForTokenClassification"]
    assert task_labels(export, "tagger") == TAGS
    assert_tagger_export_scores_as_transformers(export)


def test_a_run_from_the_export_keeps_its_head(tagger, mirror):
    """No training steps from the export: the same scores and predictions as the run that
    trained it, and the same head exported again (a fresh head would differ)."""
    again = [*TINY, "trainer.max_steps=0", f"init_from=ckpt:{tagger['run']}", "label=reloaded",
             "save_model=true"]
    done = plmbench("run", *again, f"results_dir={tagger['results']}")
    assert done.rc == 0, done.err
    where = run_dir(tagger["results"], "ner/ncbi_disease", *again[1:], label="reloaded")
    assert read(where)["metrics"] == read(tagger["run"])["metrics"]
    for split in ("validation", "test"):
        file = f"predictions/{split}.jsonl"
        assert (where / file).read_text() == (tagger["run"] / file).read_text()
    first, second = (load_file(d / "model/model.safetensors") for d in (tagger["run"], where))
    assert first.keys() == second.keys() and "classifier.weight" in first
    assert all(torch.equal(first[name], second[name]) for name in first)


def entities_by_hand(words: list[str], tags: list[str]) -> list[tuple[int, int]]:
    """Character spans in ``" ".join(words)`` of the B-X (I-X)* runs of valid BIO ``tags``."""
    starts = [sum(len(w) + 1 for w in words[:i]) for i in range(len(words))]
    spans = []
    for i, tag in enumerate(tags):
        if tag.startswith("B-"):
            j = i
            while j + 1 < len(tags) and tags[j + 1] == "I-" + tag[2:]:
                j += 1
            spans.append((starts[i], starts[j] + len(words[j])))
    return spans


def test_tagger_entities_are_the_runs_own_predictions(tagger):
    lines = [json.loads(line) for line in (tagger["run"] / "predictions/test.jsonl").open()]
    words = [line["tokens"] for line in lines]
    texts = [" ".join(w) for w in words]
    finder = TaggerEntities(f"ckpt:{tagger['run']}", batch_size=5)
    assert finder.tag_words(words) == [line["predicted"] for line in lines]
    expected = [entities_by_hand(w, line["predicted"]) for w, line in zip(words, lines,
                                                                            strict=True)]
    found = finder.find_batch(texts)
    assert found == expected and sum(map(len, found)) > 0
    # padding and batching change nothing; one text at a time is the same; no words, no entity
    by_export = TaggerEntities(f"hf:{tagger['run'] / 'model'}", batch_size=64)
    assert by_export.find_batch(["", *texts]) == [[], *expected]
    assert finder(texts[3]) == expected[3]


def test_the_ssm_objective_finds_entities_with_the_tagger(tagger, mirror):
    tagging = ["+objective.entities._target_=lit_models.families.entity_tagger.TaggerEntities",
               f"+objective.entities.checkpoint=ckpt:{tagger['run']}"]
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["task=pretrain/wikipedia", "objective=ssm",
                                           *tagging])
    objective = hydra.utils.instantiate(cfg.objective)
    assert isinstance(objective.find.entities, TaggerEntities)
    text = "Familial adenomatous polyposis was described in 1925 ."
    date = (len(text) - 6, len(text) - 2)  # "1925": an entity overlapping it gives way
    assert objective.find(text) == sorted({date, *(
        e for e in objective.find.entities(text) if not (e[0] < date[1] and date[0] < e[1]))})
    args = ["model=bert-tiny-scratch", "task=pretrain/wikipedia", "objective=ssm", *tagging,
            "task.max_train_samples=6", "task.eval_documents=2", "task.batch_size=8",
            "trainer.max_steps=2", "trainer.enable_progress_bar=false"]
    results = tagger["results"]
    done = plmbench("run", *args, f"results_dir={results}")
    assert done.rc == 0, done.err
    record = read(run_dir(results, "pretrain/wikipedia", *args[2:]))
    assert record["status"] == "ok" and record["steps"] == 2
    assert record["config"]["objective"]["entities"]["checkpoint"] == f"ckpt:{tagger['run']}"
    assert record["metrics"]["heldout"]["mlm_loss"] > 0


def test_a_checkpoint_that_is_no_tagger_ends_in_one_line(tagger, minilm_path, mirror, tmp_path):
    with pytest.raises(PlmbenchError, match=r"is not a tagging export \(no "
                                            r"\*ForTokenClassification in .*\); train one with"):
        TaggerEntities(f"hf:{minilm_path}")  # a sentence encoder (BertModel)
    with pytest.raises(PlmbenchError, match="use ckpt:<run dir>, hf:<dir> or hf:<org>"):
        TaggerEntities(str(tagger["run"]))  # no ckpt: / hf:
    args = ["model=bert-tiny-scratch", "task=pretrain/wikipedia", "objective=ssm",
            "+objective.entities._target_=lit_models.families.entity_tagger.TaggerEntities",
            f"+objective.entities.checkpoint=hf:{minilm_path}", "task.max_train_samples=6",
            "task.eval_documents=2", "trainer.max_steps=1", f"results_dir={tmp_path}"]
    done = plmbench("run", *args)
    assert done.rc != 0
    errors = [line for line in done.err_lines if "is not a tagging export" in line]
    assert len(errors) == 1 and errors[0].startswith("error:"), done.err
