"""``check_checkpoint`` (issue 27): the checkpoint transformers saves of every architecture passes
whole, and every way a weight could be dropped or left random is refused by name: a weight no
net of the architecture has a place for (inside the encoder, or under the pretraining heads'
prefix that an encoder load passes over), one of another shape than config.json implies, one
the encoder needs that is missing, an output layer untied from the embeddings where our nets
tie them, a config field no net implements (relative positions, a decoder config), an
architecture plmbench lacks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from datamodules.errors import PlmbenchError
from lit_models.archs import get_arch
from lit_models.interop.hf_check import check_checkpoint
from tests.hub_cache import ARCHS, session_hub_cache


@pytest.fixture(scope="session")
def hub_cache(tmp_path_factory):
    return session_hub_cache(tmp_path_factory)


@pytest.mark.parametrize("arch", ARCHS)
def test_every_architectures_published_checkpoint_passes(hub_cache, arch):
    snapshot = hub_cache[1][arch].snapshot
    check_checkpoint(snapshot)
    check_checkpoint(snapshot, get_arch(arch))


def edited(hub_cache, tmp_path: Path, arch: str, weights=None, config=None) -> Path:
    """A copy of the cached ``arch`` checkpoint with its weights and config.json edited."""
    directory = tmp_path / arch
    shutil.copytree(hub_cache[1][arch].snapshot, directory)
    state = load_file(directory / "model.safetensors")
    if weights:
        weights(state)
        save_file(state, directory / "model.safetensors", metadata={"format": "pt"})
    if config:
        values = json.loads((directory / "config.json").read_text())
        (directory / "config.json").write_text(json.dumps(values | config))
    return directory


@pytest.mark.parametrize("arch, edit, expected", [
    ("bert", lambda s: s.update({"bert.encoder.layer.1.extra.weight": torch.zeros(2)}),
     r"no plmbench net has a place for \['encoder.layer.1.extra.weight'\]"),
    ("roberta", lambda s: s.update({"lm_head.extra.bias": torch.zeros(2)}),
     r"no plmbench net has a place for \['lm_head.extra.bias'\]"),
    ("gpt2", lambda s: s.update({"transformer.h.0.mlp.c_fc.weight": torch.zeros(3, 3)}),
     r"h.0.mlp.c_fc.weight of shape \(3, 3\)"),
    ("bert", lambda s: s.pop("bert.encoder.layer.0.output.dense.weight"),
     r"lacks weights \['encoder.layer.0.output.dense.weight'\]"),
])
def test_weights_that_would_be_dropped_or_left_random_are_refused_by_name(
        hub_cache, tmp_path, arch, edit, expected):
    with pytest.raises(PlmbenchError, match=expected):
        check_checkpoint(edited(hub_cache, tmp_path, arch, weights=edit))


def test_an_untied_output_layer_is_refused_where_our_nets_tie_it(hub_cache, tmp_path):
    def untie(state):
        state["cls.predictions.decoder.weight"] = torch.randn_like(
            state["bert.embeddings.word_embeddings.weight"])

    directory = edited(hub_cache, tmp_path, "bert", weights=untie,
                       config={"tie_word_embeddings": False})
    with pytest.raises(PlmbenchError, match=r"tie_word_embeddings=false, .*"
                                            r"\['cls.predictions.decoder.weight'\]"):
        check_checkpoint(directory)


def test_a_config_field_no_net_implements_and_an_unknown_architecture_are_refused(
        hub_cache, tmp_path):
    relative = edited(hub_cache, tmp_path, "bert", config={"position_embedding_type":
                                                            "relative_key"})
    with pytest.raises(PlmbenchError, match="relative_key"):
        check_checkpoint(relative)
    decoder = edited(hub_cache, tmp_path / "decoder", "roberta", config={"is_decoder": True})
    with pytest.raises(PlmbenchError, match="is_decoder=true .* attend both ways"):
        check_checkpoint(decoder)
    remote = edited(hub_cache, tmp_path, "roberta", config={  # Alibaba's GTE: remote code
        "model_type": "new", "auto_map": {"AutoModel": "modeling.NewModel"}})
    with pytest.raises(PlmbenchError, match=r"model_type 'new'; plmbench imports \[.*'bert'.*"
                                            r"'deberta-v2'.*'modernbert'.*its auto_map names"):
        check_checkpoint(remote)
