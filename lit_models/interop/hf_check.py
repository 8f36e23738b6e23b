"""Whether plmbench can hold a Hugging Face checkpoint whole, checked before a run has a
directory (issue 27): read from config.json and the weights' names and shapes alone (meta
tensors: nothing is loaded), against the nets ``lit_models.interop.hf.from_hf`` would build.

A checkpoint of an architecture plmbench lacks (one that needs remote code) or with a config
field no net implements is refused by ``read_config``; one with a weight no net of its
architecture has a place for (which an encoder-only load would otherwise pass over), of
another shape, or lacking one the encoder needs, by ``check_checkpoint``, each weight named.
What passes loads every weight, or leaves out by design only what the run's net does not use
(the pretraining heads under a task head, a fine-tuned task head of other labels).
"""

import json
import re
from dataclasses import fields, replace
from pathlib import Path

import torch
from safetensors import safe_open
from torch import Tensor

from datamodules.errors import PlmbenchError
from lit_models.archs import Arch
from lit_models.interop.hf import (
    BESIDE_FILE,
    _canonical,
    _placed,
    _pretraining_net,
    _refuse,
    _weights_file,
    read_config,
    read_weight_files,
)


def _meta_file(file: Path, safetensors: bool) -> dict[str, Tensor]:
    if safetensors:
        with safe_open(file, "pt") as handle:
            return {k: torch.empty(handle.get_slice(k).get_shape(), device="meta")
                    for k in handle.keys()}  # noqa: SIM118 (safe_open is no mapping)
    return torch.load(file, map_location="meta", weights_only=True)


def _meta_weights(file: Path) -> dict[str, Tensor]:
    """A weights file's (or every shard's) tensors as meta tensors: their names and shapes, no
    data read."""
    return read_weight_files(file, _meta_file)


def check_checkpoint(directory: str | Path, arch: Arch | None = None) -> None:
    """Refuse, before anything is loaded, a checkpoint plmbench cannot hold whole (issue 27): an
    architecture or config field it lacks (``read_config``), a weight that no net of its
    architecture (``arch``, as in ``read_config``, or the first of its ``model_type``: a BERT
    checkpoint's NSP head under a SpanBERT preset) has a place for, one of another shape, or one
    the encoder needs that it lacks; each named in one ``PlmbenchError`` line. Every weight is
    then loaded, or one the run's net does not use by design (the pretraining heads under a task
    head, a fine-tuned task head of other labels). Reads only names and shapes."""
    directory = Path(directory)
    own, _ = read_config(directory, arch)
    raw = _meta_weights(_weights_file(directory))
    if (directory / BESIDE_FILE).is_file():
        raw |= _meta_weights(directory / BESIDE_FILE)
    first = read_config(directory)[0]
    readings = [_places(directory, a, raw) for a in [own, *([first] if first is not own else [])]]
    _refuse_untied(directory, own, raw)
    missing, mismatched, _, state = readings[0]
    used = set().union(*(reading[2] for reading in readings))
    unknown = [k for k in state if k not in used and not k.startswith(own.hf.task_head_prefixes)]
    _refuse({"has weights no plmbench net has a place for": unknown, "lacks weights": missing,
             "has": mismatched}, f"plmbench's {own.name} nets ({directory})", own.hf)


def _refuse_untied(directory: Path, arch: Arch, raw: dict[str, Tensor]) -> None:
    """A checkpoint whose config.json unties the output layer from the input embeddings
    (``tie_word_embeddings: false``) where ``arch``'s nets tie them: its output layer, which a
    load skips as a tied copy (``HFLayout.skipped``), is its own and would be dropped."""
    hf_config = json.loads((directory / "config.json").read_text())
    names = {f.name for f in fields(arch.config)}
    if hf_config.get("tie_word_embeddings") is not False or "tie_word_embeddings" in names:
        return
    skipped = re.compile(arch.hf.skipped)
    own = [k for k in raw if k.endswith("weight") and skipped.search(k.removeprefix(
        arch.hf.prefix))]
    if own:
        raise PlmbenchError(
            f"{directory / 'config.json'}: tie_word_embeddings=false, so the checkpoint's output "
            f"layer {own} is its own, and plmbench's {arch.name} nets have no place for it (they "
            "tie it to the input embeddings); use a checkpoint with tied embeddings"
        )


def _places(directory: Path, arch: Arch, raw: dict[str, Tensor]
            ) -> tuple[list[str], list[str], set[str], dict[str, Tensor]]:
    """What ``arch``'s encoder (with a pooler where the checkpoint has one) and pretraining net,
    built on the meta device as ``from_hf`` builds them, make of the weights ``raw``: the
    encoder's missing weights, both nets' mismatched ones and placed ones, and the weights by
    canonical name."""
    _, config = read_config(directory, arch)
    config = replace(config, **arch.hf.weights_config(set(raw)))
    state = _canonical(raw, arch.hf)
    pooled = {"add_pooling_layer": any(k.startswith("pooler.") for k in state)}
    with torch.device("meta"):  # no memory, no initialisation
        encoder = arch.encoder(config, **pooled) if arch.kind == "encoder" else arch.encoder(
            config)
        pretraining = _pretraining_net(arch, directory, config)
    _, missing, mismatched, used = _placed(encoder, state, arch.hf)
    _, _, more_mismatched, more_used = _placed(pretraining, state, arch.hf)
    return missing, mismatched + more_mismatched, used | more_used, state
