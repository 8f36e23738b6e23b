"""Trainer presets (``conf/trainer``): what each one gives Lightning, the DataLoaders and
``torch.compile``, and that a run applies them to whatever task it runs.

Then every preset a user picks, end to end on CPU with only what a CPU cannot do mapped away: the
smoke study (conf/experiment/smoke.yaml: bert-tiny-scratch pretrained with MLM alone and fine-tuned
on RTE from that checkpoint, a SQuAD reader, a BART summariser evaluated on generated text, an
open-QA reader over a FAISS index of MiniLM vectors) under

- ``trainer=cpu``, as it is;
- ``trainer=gpu`` with ``trainer.accelerator=cpu``: bf16-mixed autocast on CPU, the global-norm
  clip with the fused AdamW, 4 DataLoader workers with pinned memory and persistent workers
  (``trainer.compile``, which the preset leaves off, runs once above with ``aot_eager``: inductor
  also compiles on this CPU, but for minutes per model);
- ``trainer=ddp`` with ``trainer.accelerator=cpu trainer.devices=2``: Lightning's launcher
  starts a second rank per run, which talk over gloo, in bf16 with the preset's loaders; a fresh
  cache, so both ranks train vocabularies and build the FAISS index at once;
- ``hydra/launcher=slurm``: the smoke runs as one job array through hydra-submitit-launcher with
  the preset's parameters, submitit's debug executor in place of sbatch (the jobs' pickled
  submissions run one after another in this process), ``trainer=gpu`` inside as slurm.yaml's
  one GPU per task asks. A study is one job on a cluster (bench/studies/study.py): the study column
  is the others'.

Each run leaves an ok record and a row on its board. GPU-only paths: docs/gpu.md, tests/gpu/.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_dir

from bench.boards.table import build_table
from bench.record import iter_records
from bench.run.execute import CONF_DIR
from bench.run.launch import check_accelerator
from datamodules.base import PlmDataModule
from datamodules.errors import PlmbenchError
from tests.bench.invoke import (
    mirror_with,
    plmbench,
    plmbench_on_mirror,
    read,
    reset_cli_state,
    run_dir,
)

#: keys of a trainer preset that are ours, not lightning.Trainer arguments
OURS = {"compile", "dataloader", "threads"}


def preset(name: str):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[f"trainer={name}"]).trainer


@pytest.mark.parametrize("name", ["cpu", "gpu", "ddp"])
def test_every_other_key_is_a_trainer_argument(name):
    trainer = preset(name)
    arguments = set(inspect.signature(L.Trainer.__init__).parameters)
    assert set(trainer) - OURS <= arguments
    assert trainer.compile is False  # compiling is asked for, never a default
    assert set(trainer.dataloader) == {"num_workers", "pin_memory", "persistent_workers"}


def test_gpu_presets_train_in_bf16_with_pinned_memory_and_workers():
    for name in ("gpu", "ddp"):
        trainer = preset(name)
        assert trainer.precision == "bf16-mixed"  # fp32 master weights, bf16 autocast
        assert trainer.dataloader.num_workers > 0
        assert trainer.dataloader.pin_memory and trainer.dataloader.persistent_workers
    cpu = preset("cpu")
    assert cpu.precision == "32-true"
    assert cpu.dataloader.num_workers == 0 and not cpu.dataloader.pin_memory


def test_threads_are_one_on_cpu_and_torchs_default_on_gpus():
    assert preset("cpu").threads == 1  # measured faster on shared cores (cpu.yaml)
    assert preset("gpu").threads is None and preset("ddp").threads is None


def test_trainer_threads_set_torchs_threads_and_leave_the_hash_alone():
    from bench.config_identity import config_hash
    from bench.run.execute import DEFAULT_THREADS, set_threads

    try:
        set_threads(1)
        assert torch.get_num_threads() == 1
        set_threads(None)  # a later run of the same process gets torch's default back
        assert torch.get_num_threads() == DEFAULT_THREADS
        for bad in (0, -2, 1.5, True, "two"):
            with pytest.raises(PlmbenchError, match=r"trainer.threads=.*>= 1, or null"):
                set_threads(bad)
    finally:
        torch.set_num_threads(DEFAULT_THREADS)
    config = {"model": {"name": "m"}, "trainer": {"max_steps": 3}}
    assert config_hash({**config, "trainer": {"max_steps": 3, "threads": 1}}) == config_hash(
        config)


def test_loader_options_reach_the_dataloaders():
    dm = PlmDataModule({"name": "t", "splits": {"eval": ["a"]}, "batch_size": 2}, list, seed=0)
    dm.configure_loaders(num_workers=2, pin_memory=True, persistent_workers=True)
    dm.train_data, dm.eval_data = list(range(5)), [list(range(3))]
    for loader in (dm.train_dataloader(), *dm.val_dataloader()):
        assert loader.num_workers == 2 and loader.pin_memory and loader.persistent_workers
    dm.configure_loaders(num_workers=0, persistent_workers=True)  # no workers to keep
    assert not dm.train_dataloader().persistent_workers


@pytest.fixture
def clean_cli_state():
    reset_cli_state()
    yield
    reset_cli_state()


def test_a_run_loads_with_the_presets_workers_and_compiles(mirror, monkeypatch, tmp_path,
                                                          clean_cli_state):
    """A run under trainer=gpu on CPU: the preset's loader settings reach its DataModule, and
    trainer.compile (here aot_eager, which traces as inductor does, Dynamo and AOTAutograd,
    without generating code) compiles the module's encoder, which then trains (compiled steps
    against eager ones: tests/lit_models/core/test_compile.py). Packed pretraining rows: one
    shape, one compilation."""
    seen: dict[str, object] = {}
    configure = PlmDataModule.configure_loaders

    def spy_loaders(self, **options):
        seen["loaders"] = options
        configure(self, **options)

    monkeypatch.setattr(PlmDataModule, "configure_loaders", spy_loaders)
    args = ["experiment=smoke/pretrain", "trainer=gpu", "trainer.accelerator=cpu",
            "trainer.compile=aot_eager"]
    result = plmbench("run", *args, f"results_dir={tmp_path}")
    assert result.rc == 0, result.err
    where = run_dir(tmp_path, "pretrain/wikipedia", *args)
    record = read(where)
    assert record["status"] == "ok" and record["steps"] == 2
    assert seen["loaders"] == {"num_workers": 4, "pin_memory": True, "persistent_workers": True}
    assert "torch.compile (aot_eager): net.bert" in (where / "run.log").read_text()


@pytest.mark.parametrize("name", ["gpu", "ddp"])
def test_a_gpu_preset_without_a_gpu_is_one_line(name, tmp_path, monkeypatch, clean_cli_state):
    """Before anything is built or written: the preset, and what to run instead."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    done = plmbench("run", f"trainer={name}", f"results_dir={tmp_path}")
    assert done.rc == 2 and len(done.err_lines) == 1, done.err
    assert "trainer.accelerator=gpu, but this machine has no GPU" in done.err_lines[0]
    assert "trainer=cpu" in done.err_lines[0] and "trainer.accelerator=cpu" in done.err_lines[0]
    assert not list(tmp_path.rglob("record.json"))


def test_more_devices_than_the_machine_has_is_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    check_accelerator({"accelerator": "gpu", "devices": 2})  # fits
    check_accelerator({"accelerator": "gpu", "devices": -1})  # all of them
    with pytest.raises(PlmbenchError, match=r"trainer.devices=4, but this machine has 2 CUDA"):
        check_accelerator({"accelerator": "gpu", "devices": 4})


# --- every preset end to end: the smoke study under each --------------------------------------

#: the smoke study's runs: task -> its board
SMOKE = {"pretrain/wikipedia": "pretrain", "glue/rte": "glue", "squad/v1": "squad",
         "summarization/aeslc": "summarization", "open_qa/squad_open": "open_qa"}
#: each preset with what a CPU cannot do mapped away, and nothing else
ON_CPU = {
    "cpu": ["trainer=cpu"],
    "gpu": ["trainer=gpu", "trainer.accelerator=cpu"],
    "ddp": ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2"],
    "slurm": ["trainer=gpu", "trainer.accelerator=cpu"],
}


def smoke_ddp(tmp_path_factory) -> Path:
    """The study under DDP, in a process of its own: Lightning's launcher re-runs the command
    for rank 1, which a test process cannot be."""
    mirror = mirror_with("wikipedia_en_sample")
    results, scratch = tmp_path_factory.mktemp("results"), tmp_path_factory.mktemp("scratch")
    env = {**os.environ, "PLMBENCH_DATA": str(mirror), "PLMBENCH_CACHE": str(scratch / "cache"),
           "HF_DATASETS_CACHE": str(scratch / "datasets"), "OMP_NUM_THREADS": "1"}
    command = [str(Path(sys.executable).with_name("plmbench")), "study", "experiment=smoke",
               *ON_CPU["ddp"], f"results_dir={results}"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # rank 0 alone writes each run's record (smoke_records: one per run) and its summary line
    assert done.stderr.count(" ok in ") + done.stdout.count(" ok in ") == len(SMOKE)
    return results


def smoke_slurm(tmp_path_factory) -> Path:
    """The smoke runs as a SLURM job array (hydra/launcher=slurm) on this machine: submitit's
    AutoExecutor(cluster="slurm") becomes its debug executor, which runs the jobs one after
    another in this process, so the preset's sbatch parameters are still checked by submitit as
    SLURM's; each job's submission goes to a file with cloudpickle and comes back, as sbatch's
    jobs read theirs."""
    import submitit
    from submitit.core.utils import DelayedSubmission
    from submitit.local.debug import DebugJob

    scratch = tmp_path_factory.mktemp("scratch")
    executor, job = submitit.AutoExecutor.__init__, DebugJob.__init__

    def on_this_machine(self, folder, cluster=None, **kwargs):
        assert cluster == "slurm"
        executor(self, folder, cluster="debug", **kwargs)

    def through_a_file(self, folder, submission):
        path = scratch / f"{id(submission)}_submitted.pkl"
        submission.dump(path)
        job(self, folder, DelayedSubmission.load(path))

    cells = ",".join(f"smoke/{name}" for name in
                     ("pretrain", "glue", "squad", "summarization", "open_qa"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(submitit.AutoExecutor, "__init__", on_this_machine)
        patch.setattr(DebugJob, "__init__", through_a_file)
        # no SLURM here to ask (tests/cluster submits to a real one): the debug executor stands in
        patch.setattr("bench.run.config_check.check_launcher", lambda hydra: None)
        done, results = plmbench_on_mirror(
            tmp_path_factory, "wikipedia_en_sample", "run", "-m", "hydra/launcher=slurm",
            f"experiment={cells}", *ON_CPU["slurm"])
    assert done.rc == 0, done.err[-3000:]
    assert len(list(scratch.glob("*_submitted.pkl"))) == len(SMOKE)  # every run was a job
    return results


def smoke_runs(preset: str, tmp_path_factory) -> Path:
    """The results directory of the smoke runs under ``preset``."""
    if preset == "ddp":
        return smoke_ddp(tmp_path_factory)
    if preset == "slurm":
        return smoke_slurm(tmp_path_factory)
    done, results = plmbench_on_mirror(tmp_path_factory, "wikipedia_en_sample", "study",
                                       "experiment=smoke", *ON_CPU[preset])
    assert done.rc == 0, done.err[-3000:]
    return results


def smoke_records(results: Path) -> dict[str, dict]:
    """The smoke runs' records under ``results`` by task: one per run, each ok after its two
    steps, each with a row of its own on its board (also for tests/gpu)."""
    records = {r["task"]: r for r in iter_records(results)}
    assert set(records) == set(SMOKE) and len(list(iter_records(results))) == len(SMOKE)
    for task, record in records.items():
        assert record["status"] == "ok", (task, record["error"])
        assert record["steps"] == 2 and record["metrics"], task
        assert record["config"]["trainer"]["gradient_clip_val"] == 1.0  # with the fused AdamW
        assert record["board"] == SMOKE[task]
        table = build_table(records.values(), record["board"])
        rows = [row for row in table.rows if not row.baseline]
        assert [row.label.split(" (")[0] for row in rows] == [record["label"]], task
        assert any(cell.n == 1 for cell in rows[0].cells.values()), task
    return records


@pytest.mark.parametrize("preset", sorted(ON_CPU))
def test_every_preset_runs_every_kind_of_run_to_an_ok_record_and_a_board_row(preset,
                                                                            tmp_path_factory):
    records = smoke_records(smoke_runs(preset, tmp_path_factory))
    for task, record in records.items():
        trainer = record["config"]["trainer"]
        assert record["hardware"]["accelerator"] == trainer["accelerator"] == "cpu"
        if preset == "cpu":
            assert trainer["precision"] == "32-true" and trainer["dataloader"]["num_workers"] == 0
            continue
        # the GPU presets as they are: bf16 autocast, workers, pinned and persistent
        assert trainer["precision"] == "bf16-mixed"
        assert trainer["dataloader"] == {"num_workers": 4, "pin_memory": True,
                                         "persistent_workers": True}
        if preset == "ddp":  # two ranks share the global batch of 4: 2 each, their samples summed
            assert trainer["strategy"] == "ddp_find_unused_parameters_true"
            assert record["hardware"]["devices"] == 2
            assert record["batching"] == {"world_size": 2, "per_process_batch": 2,
                                          "accumulate_grad_batches": 1, "global_batch": 4}, task
            assert record["throughput"]["train_samples"] == 2 * 4, task  # 2 steps of 4
    # the fine-tuning run starts from the pretraining run (in the study; a job array has no order)
    if preset != "slurm":
        assert records["glue/rte"]["init_from"].startswith("ckpt:")
