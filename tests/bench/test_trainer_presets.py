"""Trainer presets (``conf/trainer``): what each one gives Lightning, the DataLoaders and
``torch.compile``, and that a run applies them to whatever task it runs."""

from __future__ import annotations

import inspect

import lightning as L
import pytest
from hydra import compose, initialize_config_dir

from bench.run import CONF_DIR
from datamodules.base import PlmDataModule
from lit_models.core.module import PlmModule
from tests.bench.invoke import plmbench, read, reset_cli_state, run_dir

#: keys of a trainer preset that are ours, not lightning.Trainer arguments
OURS = {"compile", "dataloader"}


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
    """Any task's run: the trainer preset's loader settings reach its DataModule, and
    trainer.compile (a backend's name here) asks the module to compile its encoders."""
    monkeypatch.setenv("PLMBENCH_CACHE", str(tmp_path / "cache"))
    seen: dict[str, object] = {}
    configure = PlmDataModule.configure_loaders

    def spy_loaders(self, **options):
        seen["loaders"] = options
        configure(self, **options)

    def spy_compile(self, backend="inductor"):  # compiled steps: tests/lit_models/test_compile.py
        seen["compiled"] = backend
        return []

    monkeypatch.setattr(PlmDataModule, "configure_loaders", spy_loaders)
    monkeypatch.setattr(PlmModule, "compile_encoders", spy_compile)
    args = ["model=bert-tiny", "task=glue/rte", "task.max_train_samples=16",
            "task.max_eval_samples=8", "trainer.max_steps=1", "trainer.enable_progress_bar=false",
            "trainer.compile=aot_eager", "trainer.dataloader.num_workers=1"]
    result = plmbench("run", *args, f"results_dir={tmp_path / 'results'}")
    assert result.rc == 0, result.err
    assert read(run_dir(tmp_path / "results", "glue/rte", *args))["status"] == "ok"
    assert seen["loaders"] == {"num_workers": 1, "pin_memory": False,
                               "persistent_workers": False}
    assert seen["compiled"] == "aot_eager"
