"""The GPU presets end to end with nothing mapped away (``make test-gpu``): the smoke study
(conf/experiment/smoke.yaml: MLM pretraining, GLUE from its checkpoint, SQuAD, summarization with
generation, open-domain QA over a FAISS index) under ``trainer=gpu`` and under ``trainer=ddp`` over
every GPU of the machine (one GPU: DDP of one rank, still NCCL), and a fine-tuning run in fp16
(``trainer.precision=16-mixed``: the GradScaler with the fused AdamW, for pre-Ampere GPUs). Each
run leaves an ok record and a row on its board, as tests/bench/run/test_trainer_presets.py checks
for the same runs on CPU; here bf16 matmuls on tensor cores, SDPA's CUDA kernels, pinned-memory
copies, CUDA events in the throughput callback and the datasheet MFU are the real ones.

DDP runs in a process of its own: Lightning's launcher starts rank 1 by re-running the command
line, which under ``python -m pytest`` would be pytest's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from lit_models.measure.peak_flops import chip
from tests.bench.invoke import mirror_with, plmbench_on_mirror, read, run_dir
from tests.bench.run.test_trainer_presets import smoke_records


def check_on_gpus(records: dict[str, dict], devices: int) -> None:
    """Every run trained on the GPU(s), timed by CUDA events, in bf16 with the preset's loaders."""
    known_peak = chip(torch.cuda.get_device_name()) is not None
    for task, record in records.items():
        trainer = record["config"]["trainer"]
        assert record["hardware"]["accelerator"] == "gpu" and trainer["precision"] == "bf16-mixed"
        assert trainer["dataloader"]["pin_memory"] and trainer["dataloader"]["num_workers"] > 0
        throughput = record["throughput"]
        assert throughput["train_step_seconds"] > 0, task
        if devices == 1:  # 2 steps of 4; over more ranks, more than one rank's samples
            assert throughput["train_samples"] == 4 * 2, task
        else:  # (with more ranks than the capped data has batches of 4, smaller batches)
            assert throughput["train_samples"] > 4 * 2, task
        if known_peak and "train_flops_per_s" in throughput:
            assert 0 < throughput["mfu"] < 1, task


def test_the_gpu_preset_runs_every_kind_of_run(tmp_path_factory):
    done, results = plmbench_on_mirror(tmp_path_factory, "wikipedia_en_sample", "study",
                                       "experiment=smoke", "trainer=gpu")
    assert done.rc == 0, done.err[-3000:]
    records = smoke_records(results)
    check_on_gpus(records, devices=1)
    assert records["glue/rte"]["init_from"].startswith("ckpt:")


def test_the_ddp_preset_runs_every_kind_of_run_on_every_gpu(tmp_path_factory):
    results, scratch = tmp_path_factory.mktemp("results"), tmp_path_factory.mktemp("scratch")
    env = {**os.environ, "PLMBENCH_DATA": str(mirror_with("wikipedia_en_sample")),
           "PLMBENCH_CACHE": str(scratch / "cache"),
           "HF_DATASETS_CACHE": str(scratch / "datasets")}
    command = [str(Path(sys.executable).with_name("plmbench")), "study", "experiment=smoke",
               "trainer=ddp", f"results_dir={results}"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    records = smoke_records(results)
    check_on_gpus(records, devices=torch.cuda.device_count())
    assert all(r["config"]["trainer"]["devices"] == -1 for r in records.values())


def test_fp16_with_its_gradient_scaler(tmp_path_factory):
    overrides = ["experiment=smoke/glue", "trainer=gpu", "trainer.precision=16-mixed"]
    done, results = plmbench_on_mirror(tmp_path_factory, "glue", "run", *overrides)
    assert done.rc == 0, done.err[-3000:]
    record = read(run_dir(results, "glue/rte", *overrides))
    assert record["status"] == "ok" and record["steps"] == 2
    assert record["hardware"]["precision"] == "16-mixed"
