"""Released checkpoints by name (issue 27): ``model=roberta-base`` is RoBERTa's published weights,
random weights say ``-scratch``, every released preset carries its paper's fine-tuning recipe and
composes with no network, and the papers' GLUE and SQuAD tables are studies
(``conf/experiment/published_*.yaml``) whose CPU twin runs end to end on a cached hub."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from bench.boards.table import build_table
from bench.compose import points
from bench.record import iter_records
from bench.run.config_check import check_config
from bench.run.execute import CONF_DIR
from bench.studies.study import composed, study_runs
from datamodules.errors import PlmbenchError
from datamodules.hub import parse_hub_id
from datamodules.init_from import InitFrom
from lit_models.archs import ARCHS, BASELINES, get_arch
from lit_models.core.build import check_preset
from tests.bench.invoke import plmbench
from tests.bench.run.test_model_presets import encoder_parameters


def _preset(name: str):
    """A preset as a run composes it (one on another, ``defaults:``, through its base)."""
    preset = OmegaConf.load(CONF_DIR / "model" / f"{name}.yaml")
    return composed([f"model={name}"]).model if "defaults" in preset else preset


PRESETS = {path.stem: _preset(path.stem) for path in sorted((CONF_DIR / "model").glob("*.yaml"))}
#: presets of released checkpoints by hub id (minilm-l6's directory comes from a Python package)
RELEASED = sorted(name for name, preset in PRESETS.items()
                  if str(OmegaConf.to_container(preset)["init_from"]).startswith("hf:")
                  and "${" not in str(OmegaConf.to_container(preset)["init_from"]))
#: the hub's own names of the checkpoints the papers released (issue 27, item 3)
PAPERS = ["bert-base-uncased", "bert-large-uncased", "bert-base-cased", "roberta-base",
          "roberta-large", "albert-base-v2", "albert-large-v2", "electra-small-discriminator",
          "electra-base-discriminator", "electra-large-discriminator", "spanbert-base-cased",
          "spanbert-large-cased", "deberta-base", "deberta-large", "xlnet-base-cased",
          "xlnet-large-cased", "longformer-base-4096", "gpt2", "t5-small", "t5-base", "bart-base",
          "bart-large", "distilbert-base-uncased", "bert_uncased_L-2_H-128_A-2",
          "bert_uncased_L-4_H-256_A-4", "bert_uncased_L-4_H-512_A-8",
          "bert_uncased_L-8_H-512_A-8", "MiniLM-L6-H384-uncased", "MiniLM-L12-H384-uncased"]
#: the CPU twin's checkpoints: BERT's miniatures and MiniLM
CPU_IDS = ["google/bert_uncased_L-2_H-128_A-2", "google/bert_uncased_L-4_H-256_A-4",
           "google/bert_uncased_L-4_H-512_A-8", "google/bert_uncased_L-8_H-512_A-8",
           "nreimers/MiniLM-L6-H384-uncased", "microsoft/MiniLM-L12-H384-uncased"]


def test_no_preset_named_like_a_released_model_starts_from_scratch():
    """Random weights are named ``-scratch``; a Transformer preset without it is released
    weights, and every released checkpoint the papers published has its hub name here."""
    for name, preset in PRESETS.items():
        if preset.arch in ARCHS and preset.init_from == "scratch":
            assert name.endswith("-scratch"), name
        if not name.endswith("-scratch") and preset.arch in ARCHS:
            assert preset.init_from != "scratch", name
        if name.endswith("-scratch"):
            assert preset.init_from == "scratch" and preset.arch not in BASELINES, name
    assert set(PAPERS) <= set(RELEASED)
    for name in PAPERS:
        assert PRESETS[name].init_from != "scratch" and f"{name}-scratch" not in PAPERS


@pytest.mark.parametrize("name", RELEASED)
def test_a_released_preset_names_a_well_formed_hub_id_by_its_own_name(name):
    preset = PRESETS[name]
    start = InitFrom.parse(preset.init_from)
    hub_id = parse_hub_id(str(preset.init_from).removeprefix("hf:"))
    assert start.hub_id == hub_id and hub_id is not None, name
    org, _, repo = hub_id.repo_id.partition("/")
    assert org and repo == name and hub_id.revision == "main"  # a user can guess the name
    assert isinstance(preset.parameters, int) and preset.parameters > 1_000_000
    assert preset.name == name and preset.arch in ARCHS


@pytest.mark.parametrize("name", RELEASED)
def test_a_released_preset_composes_and_passes_the_check_with_no_network(
        name, monkeypatch, tmp_path):
    """Nothing cached, offline: the id is only resolved when a run starts."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for task in ("glue/rte", "squad/v1"):
        cfg = composed([f"model={name}", f"task={task}"])
        check_config(cfg)
        assert cfg.init_from == PRESETS[name].init_from
    assert not (tmp_path / "hf").exists()


def test_the_preset_recipe_reaches_the_run_and_the_command_line_wins():
    roberta = composed(["model=roberta-base", "task=glue/rte"])  # Liu et al. 2019, Table 10
    assert (roberta.optim.lr, roberta.task.batch_size, roberta.trainer.max_epochs,
            roberta.optim.warmup_ratio) == (2e-5, 32, 10, 0.06)
    electra = composed(["model=electra-large-discriminator", "task=squad/v1"])  # Table 7
    assert (electra.optim.lr, electra.optim.layerwise_lr_decay) == (5e-5, 0.9)
    assert electra.trainer.max_epochs == 3  # epochs are GLUE's recipe: SQuAD keeps its own
    albert = composed(["model=albert-base-v2", "task=glue/cola"])  # Lan et al. 2020, Table 16
    assert albert.task.max_length == 512
    changed = composed(["model=roberta-base", "task=glue/rte", "trainer.max_epochs=2",
                        "task.batch_size=16", "task.warmup_ratio=0.2"])
    assert (changed.trainer.max_epochs, changed.task.batch_size, changed.optim.warmup_ratio) == (
        2, 16, 0.2)
    # a preset without a recipe runs BERT's, as before the recipe keys existed
    scratch = composed(["model=bert-tiny-scratch", "task=glue/rte"])
    assert (scratch.task.batch_size, scratch.trainer.max_epochs, scratch.optim.warmup_ratio,
            scratch.task.max_length, scratch.optim.layerwise_lr_decay) == (32, 3, 0.1, 128, 1.0)


def test_the_miniatures_count_their_published_sizes():
    """The miniatures' ``parameters`` (Turc et al. print none) equal BERT's encoder counted by
    hand at their sizes (test_model_presets), and a misspelt recipe key is refused."""
    for name, (layers, hidden) in {"bert_uncased_L-2_H-128_A-2": (2, 128),
                                   "bert_uncased_L-4_H-256_A-4": (4, 256),
                                   "bert_uncased_L-4_H-512_A-8": (4, 512),
                                   "bert_uncased_L-8_H-512_A-8": (8, 512)}.items():
        assert PRESETS[name].parameters == encoder_parameters(30522, hidden, layers, 4 * hidden,
                                                              512, 2)
    preset = OmegaConf.to_container(PRESETS["electra-base-discriminator"])
    check_preset(get_arch("electra"), preset)
    with pytest.raises(PlmbenchError, match="did you mean model.finetune_epochs"):
        check_preset(get_arch("electra"), {**preset, "finetune_epoch": 3})


STUDIES = {"published_glue": ("glue", "gpu"), "published_squad": ("squad", "gpu"),
           "published_glue_cpu": ("glue", "cpu"), "published_squad_cpu": ("squad", "cpu")}


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_every_published_study_composes_with_no_network(study, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    # what the data mirror holds is not what this test is about (the offline mirror lacks SQuAD
    # v2.0's training split, which the config check's data check would name)
    monkeypatch.setattr("bench.run.config_check.check_data", lambda task: None)
    board, accelerator = STUDIES[study]
    cfg = composed([f"experiment={study}"])
    assert cfg.study.board == board
    models = set()
    for entry in study_runs(cfg).values():
        jobs = points([f"experiment={cfg.study.experiment}", *entry])
        assert len(jobs) == (len(str(cfg.study.seeds).split(",")) *
                             (len(str(cfg.study.glue_tasks).split(",")) if board == "glue" else
                              2 if study.endswith("_cpu") else 1))  # every task (or version) x seed
        run = composed(jobs[0])
        check_config(run)
        assert run.task.board == board and run.trainer.accelerator == accelerator
        models.add(run.model.name)
    assert all(PRESETS[m].init_from != "scratch" for m in models)
    if study.endswith("_cpu"):
        assert models == {*(i.split("/")[1] for i in CPU_IDS), "minilm-l6"}
    else:
        base = {"bert-base-uncased", "roberta-base", "albert-base-v2",
                "electra-base-discriminator", "spanbert-base-cased", "deberta-base",
                "xlnet-base-cased", "longformer-base-4096", "distilbert-base-uncased"}
        assert base <= models
    assert not (tmp_path / "hf").exists()


def test_published_glue_cpu_runs_end_to_end_on_a_cached_hub(mirror, tmp_path, monkeypatch,
                                                            minilm_path):
    """The CPU twin at tiny size: its miniature and MiniLM ids resolved offline from a hub cache
    (a tiny BERT checkpoint in the published layout under each id, tests/hub_cache.py), the
    offline all-MiniLM-L6-v2 beside them, every row on the glue board, every record naming the
    commit it measured."""
    from tests.hub_cache import lay_into_cache, offline_cache, write_checkpoint

    source, cache = tmp_path / "tiny-bert", tmp_path / "hub"
    write_checkpoint("bert", source)
    commits = {repo_id: lay_into_cache(cache, repo_id, source)[0] for repo_id in CPU_IDS}
    offline_cache(monkeypatch, cache)
    results = tmp_path / "results"
    result = plmbench("study", "experiment=published_glue_cpu", f"results_dir={results}",
                      "study.glue_tasks=glue/rte", "study.seeds=0",
                      'study.size=["task.max_train_samples=8","task.max_eval_samples=8",'
                      '"trainer.max_steps=1","task.batch_size=4"]')
    assert result.rc == 0, result.err[-3000:]
    labels = {*(i.split("/")[1] for i in CPU_IDS), "minilm-l6"}
    board = (results / "glue.md").read_text()  # the study printed and wrote its board
    assert all(f" {label} " in board for label in labels)
    table = build_table(list(iter_records(results)), "glue")
    assert {row.label for row in table.rows} == labels
    for record_path in results.rglob("record.json"):
        record = json.loads(record_path.read_text())
        assert record["status"] == "ok"
        checkpoint = record["checkpoint"]
        if record["model"] != "minilm-l6":
            assert checkpoint["commit"] == commits[checkpoint["id"]]
            assert checkpoint["id"].endswith("/" + record["model"])
