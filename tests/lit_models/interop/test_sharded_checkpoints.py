"""Checkpoints of any size (issue 34): weights in shards named by ``model.safetensors.index.json``,
as transformers' ``save_pretrained(max_shard_size=...)`` writes large models, load for every
architecture as the whole file does: ``from_hf`` gives the same net, ``check_checkpoint`` reads
every shard's names and shapes, and a shard missing beside its index is one line naming it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from datamodules.errors import PlmbenchError
from lit_models.interop.hf import from_hf
from lit_models.interop.hf_check import check_checkpoint
from tests.conftest import require
from tests.hub_cache import ARCHS, session_hub_cache

transformers = require("transformers")


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    return session_hub_cache(tmp_path_factory)


def save_sharded(source: Path, target: Path) -> list[str]:
    """``source``'s checkpoint re-saved, by the transformers class that saved it (config.json's
    ``architectures``), in shards of at most 20 kB, with its other files; the shards' names."""
    (name,) = json.loads((source / "config.json").read_text())["architectures"]
    getattr(transformers, name).from_pretrained(source).save_pretrained(
        target, max_shard_size="20KB")
    for file in source.iterdir():
        if not (target / file.name).exists() and not file.name.startswith("model."):
            shutil.copyfile(file, target / file.name)
    index = json.loads((target / "model.safetensors.index.json").read_text())
    return sorted(set(index["weight_map"].values()))


@pytest.mark.parametrize("arch_name", ARCHS)
def test_a_sharded_checkpoint_loads_as_the_whole_one(arch_name, hub_cache, tmp_path):
    _, built = hub_cache
    source = built[arch_name].snapshot
    shards = save_sharded(source, tmp_path / "sharded")
    assert len(shards) > 1 and not (tmp_path / "sharded" / "model.safetensors").exists()
    check_checkpoint(tmp_path / "sharded")  # every shard's names and shapes, nothing refused
    for with_heads in (False, True):  # what a checkpoint lacks (ELECTRA's generator) starts
        torch.manual_seed(0)           # from the same draw
        whole = from_hf(source, with_heads=with_heads).net.state_dict()
        torch.manual_seed(0)
        sharded = from_hf(tmp_path / "sharded", with_heads=with_heads).net.state_dict()
        assert whole.keys() == sharded.keys()
        assert all(torch.equal(whole[k], sharded[k]) for k in whole)


def test_a_shard_missing_beside_its_index_is_one_line(hub_cache, tmp_path):
    _, built = hub_cache
    shards = save_sharded(built["bert"].snapshot, tmp_path / "sharded")
    (tmp_path / "sharded" / shards[1]).unlink()
    for load in (from_hf, check_checkpoint):
        with pytest.raises(PlmbenchError) as info:
            load(tmp_path / "sharded")
        line = str(info.value)
        assert "\n" not in line and shards[1] in line and "model.safetensors.index.json" in line
