"""Run records (bench/record.py, bench/config_identity.py, bench/run/provenance.py): config hash,
atomic writes, tolerant reads, versions."""

from __future__ import annotations

import copy
import json
import platform
import re
import subprocess
from pathlib import Path

import pytest

from bench import config_identity
from bench import record as records
from bench.config_identity import config_hash, run_variant
from bench.record import iter_records, read_record, write_record
from bench.run import provenance
from bench.run.provenance import software_versions
from datamodules.errors import PlmbenchError

CONFIG = {
    "seed": 3,
    "results_dir": "/home/alice/plmbench/results",
    "run_name": "seed3",
    "logger": {"name": "csv"},
    "hydra": {"run": {"dir": "/tmp/x"}},
    "model": {"name": "bert-tiny-scratch", "hidden_size": 128},
    "init_from": "ckpt:/home/alice/ckpts/pretrain-1/last.ckpt",
    "optimizer": {"lr": 1e-4, "betas": [0.9, 0.999]},
    "task": {"name": "glue/rte", "data_dir": "/home/alice/data/glue/rte"},
}


def with_changes(**changes) -> dict:
    config = copy.deepcopy(CONFIG)
    config.update(changes)
    return config


def test_config_hash_is_16_hex_and_ignores_key_order():
    digest = config_hash(CONFIG)
    assert re.fullmatch(r"[0-9a-f]{16}", digest)
    assert config_hash(dict(reversed(list(CONFIG.items())))) == digest


def test_config_hash_ignores_seed_results_dir_run_name_logger_hydra():
    other = with_changes(
        seed=7, results_dir="results", run_name="other", logger={"name": "wandb"}, hydra={}
    )
    assert config_hash(other) == config_hash(CONFIG)
    assert config_hash({k: v for k, v in CONFIG.items() if k != "seed"}) == config_hash(CONFIG)


def test_config_hash_ignores_naming_and_verbosity_but_not_training_settings():
    trainer = {"max_steps": 100, "enable_progress_bar": True, "log_every_n_steps": 10}
    base = with_changes(trainer=trainer)
    renamed = with_changes(
        label="bert-tiny-v2", skip_completed=False,
        trainer={**trainer, "enable_progress_bar": False, "log_every_n_steps": 1,
                 "dataloader": {"num_workers": 4, "pin_memory": True}},
    )
    assert config_hash(renamed) == config_hash(base)
    assert config_hash(with_changes(trainer={**trainer, "max_steps": 200})) != config_hash(base)


def test_config_hash_ignores_absolute_path_prefixes_but_not_their_tail():
    moved = with_changes(
        init_from="ckpt:/scratch/bob/checkout/ckpts/pretrain-1/last.ckpt",
        task={"name": "glue/rte", "data_dir": "/mnt/data/glue/rte"},
    )
    assert config_hash(moved) == config_hash(CONFIG)
    other_ckpt = with_changes(init_from="ckpt:/home/alice/ckpts/pretrain-2/last.ckpt")
    assert config_hash(other_ckpt) != config_hash(CONFIG)
    hf_vs_ckpt = with_changes(init_from="hf:/home/alice/ckpts/pretrain-1/last.ckpt")
    assert config_hash(hf_vs_ckpt) != config_hash(CONFIG)


def test_config_hash_changes_with_learning_rate_and_model():
    assert config_hash(with_changes(optimizer={"lr": 2e-4, "betas": [0.9, 0.999]})) != (
        config_hash(CONFIG)
    )
    assert config_hash(with_changes(model={"name": "bert-tiny-scratch", "hidden_size": 256})) != (
        config_hash(CONFIG)
    )


def test_protocol_hash_ignores_the_task_only_when_asked():
    sst2 = with_changes(task={"name": "glue/sst2", "data_dir": "/d/glue/sst2"})
    assert config_hash(sst2) != config_hash(CONFIG)
    assert config_hash(sst2, ignore_task=True) == config_hash(CONFIG, ignore_task=True)


def test_config_hash_accepts_omegaconf_and_rejects_opaque_values():
    omegaconf = pytest.importorskip("omegaconf")
    assert config_hash(omegaconf.OmegaConf.create(CONFIG)) == config_hash(CONFIG)
    assert config_hash(with_changes(results_dir=Path("/x"))) == config_hash(CONFIG)
    with pytest.raises(PlmbenchError, match=r"config\.optimizer\.lr"):
        config_hash(with_changes(optimizer={"lr": object()}))


def test_write_record_round_trips_sorted_and_leaves_no_temp_file(tmp_path):
    record = {"status": "ok", "metrics": {"validation": {"accuracy": 0.5}}, "a": [1, 2]}
    path = write_record(tmp_path / "run", record)
    assert path == tmp_path / "run" / "record.json"
    assert read_record(path) == record
    text = path.read_text()
    assert text == json.dumps(record, indent=2, sort_keys=True) + "\n"
    assert [p.name for p in path.parent.iterdir()] == ["record.json"]


def test_crash_mid_write_keeps_the_old_record(tmp_path, monkeypatch):
    old = {"status": "ok", "seed": 1}
    path = write_record(tmp_path, old)

    def crash(fd):  # the whole text is in the temp file, not yet renamed over the record
        raise RuntimeError("disk full")

    monkeypatch.setattr(records.os, "fsync", crash)
    with pytest.raises(RuntimeError, match="disk full"):
        write_record(tmp_path, {"status": "failed", "seed": 1})
    assert read_record(path) == old
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


@pytest.mark.parametrize("content", [b'{"status": "ok"', b"\xff\xfe\x00", b"[1, 2]", b""])
def test_read_record_returns_none_for_corrupt_files(tmp_path, content):
    (tmp_path / "record.json").write_bytes(content)
    assert read_record(tmp_path / "record.json") is None
    assert read_record(tmp_path) is None  # a run directory works too


def test_read_record_of_missing_file_is_none(tmp_path):
    assert read_record(tmp_path / "nope" / "record.json") is None


def test_read_records_sorted_by_path_and_lists_what_it_cannot_use(tmp_path):
    usable = {"status": "failed", "task": "glue/rte", "board": "glue"}
    for name in ["b/seed2", "a/seed1", "a/seed0/deeper"]:
        write_record(tmp_path / name, {**usable, "run_dir": name})
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "record.json").write_text("{not json")
    write_record(tmp_path / "d", {"run_dir": "d"})  # no status
    write_record(tmp_path / "e", {**usable, "status": "ok", "metrics": {},
                                  "config": {"task": {"splits": {"eval": ["validation"]}}}})
    (tmp_path / "a" / "notes.json").write_text("{}")
    found, unused = records.read_records(tmp_path)
    assert [r["run_dir"] for r in found] == ["a/seed0/deeper", "a/seed1", "b/seed2"]
    assert [r["run_dir"] for r in iter_records(tmp_path)] == [r["run_dir"] for r in found]
    assert found[0]["_path"] == str(tmp_path / "a/seed0/deeper/record.json")
    assert [u.source for u in unused] == [str(tmp_path / f"{d}/record.json") for d in "cde"]
    assert unused[0].why.startswith("is not valid JSON (Expecting property name")
    assert unused[1].why == "its status is None, neither ok nor failed"
    assert "the run evaluated nothing" in unused[2].why


def test_iter_records_of_missing_directory_names_it(tmp_path):
    with pytest.raises(PlmbenchError, match="nowhere"):
        list(iter_records(tmp_path / "nowhere"))


def test_run_variant_names_the_overrides_that_change_the_result():
    overrides = ["task=glue/rte", "model=bert-tiny-scratch", "seed=3", "label=x", "results_dir=/r",
                 "trainer.enable_progress_bar=false", "logger=wandb", "logger.project=p",
                 "optim.lr=3e-4", "+trainer.max_steps=4", "init_from=ckpt:/runs/a/seed0",
                 "hydra.run.dir=/x", "experiment=quickstart"]
    # sorted, path-free, without what the path names already or what changes nothing
    expected = "init_from:ckpt:_runs_a_seed0+optim.lr:0.0003+trainer.max_steps:4"
    assert run_variant(overrides) == expected
    # a sweep's job spells the same values as Hydra writes them back: the same directory
    job = ["optim.lr=0.0003", "trainer.max_steps=4", "init_from=ckpt\\:/runs/a/seed0"]
    assert run_variant(job) == expected
    assert run_variant(["task=glue/rte", "seed=1"]) == ""
    assert run_variant(["optim.lr=1e-4"]) != run_variant(["optim.lr=2e-4"])


def test_a_long_run_variant_is_cut_but_stays_unique():
    a = run_variant([f"task.field{i}=value" for i in range(30)])
    b = run_variant([f"task.field{i}=value" for i in range(31)])
    assert len(a) == len(b) == config_identity.MAX_VARIANT and a != b
    assert a.startswith("task.field0:value+")
    assert run_variant(["optim.betas=[0.9,0.98]"]) == "optim.betas:_0.9_0.98_"
    assert run_variant(["optim.betas=[0.9, 0.98]"]) == "optim.betas:_0.9_0.98_"


def test_software_versions_names_every_component():
    versions = software_versions()
    assert set(versions) == {"python", "torch", "lightning", "plmbench", "git_commit", "git_dirty"}
    assert versions["git_dirty"] in ((None,) if versions["git_commit"] is None else (True, False))
    assert versions["python"] == platform.python_version()
    assert all(isinstance(versions[k], str) and versions[k] for k in ("torch", "lightning"))
    assert versions["git_commit"] is None or re.fullmatch(r"[0-9a-f]{40}", versions["git_commit"])


def fake_git(stdout: str, returncode: int = 0):
    def run(args, **kwargs):
        return subprocess.CompletedProcess(args, returncode, stdout=stdout, stderr="")

    return run


def test_git_commit_only_for_this_package_checkout(monkeypatch):
    package_root = provenance.PACKAGE_ROOT
    commit = "a" * 40
    monkeypatch.setattr(provenance.subprocess, "run", fake_git(f"{package_root}\n{commit}\n"))
    assert software_versions()["git_commit"] == commit
    # Installed inside some other repository (a venv in a checkout): not our commit.
    monkeypatch.setattr(provenance.subprocess, "run", fake_git(f"/elsewhere\n{commit}\n"))
    assert software_versions()["git_commit"] is None
    # A checkout without commits yet.
    monkeypatch.setattr(provenance.subprocess, "run", fake_git(f"{package_root}\nHEAD\n", 128))
    assert software_versions()["git_commit"] is None


def test_git_commit_is_none_without_git(monkeypatch):
    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(provenance.subprocess, "run", no_git)
    assert software_versions()["git_commit"] is None


def test_any_run_directory_can_be_passed_back_as_an_override_value():
    """init_from=ckpt:<run dir> must parse unquoted, cut names and odd values included."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for overrides in (["optim.betas=[0.9,0.98]", "trainer.max_steps=4"],
                      [f"task.field{i}=value" for i in range(30)],
                      ["init_from='ckpt:/runs/a=b,c/seed0'", "label=x"]):
        where = f"results/glue/rte/bert-tiny-scratch/{run_variant(overrides)}/seed0"
        assert parser.parse_override(f"init_from=ckpt:{where}").value() == f"ckpt:{where}"


def test_config_hash_tells_apart_checkpoints_inside_the_results_dir_that_end_alike():
    """Runs of a study start from checkpoints whose last two path components agree (the same
    overrides under different tasks): relative to the results directory they differ, and moving
    the results directory changes nothing."""
    def starting_from(results: str, task: str) -> dict:
        run = f"{results}/pretrain/tapt/{task}/bert-tiny-scratch/tapt/trainer.max_steps:4/seed0"
        return with_changes(results_dir=results, init_from=f"ckpt:{run}")

    chemprot, sci_cite = (starting_from("/scratch/a/results", t) for t in ("chemprot", "sci_cite"))
    assert config_hash(chemprot) != config_hash(sci_cite)
    assert config_hash(starting_from("/home/b/elsewhere", "chemprot")) == config_hash(chemprot)


def test_a_variant_of_non_ascii_values_fits_a_file_name():
    """96 characters of CJK text are 288 bytes, past the 255 a file system's name takes: the
    variant is cut by bytes too, and stays unique by its hash."""
    names = [run_variant([f'task.prompt="{"東京" * 45}{end}"']) for end in "ab"]
    assert names[0] != names[1]
    for name in names:
        assert len(name.encode()) <= 255 and re.fullmatch(r"task\.prompt:東京+.*@[0-9a-f]{8}", name)
    assert run_variant(['task.prompt="東京"']) == "task.prompt:東京"  # a short one is whole
