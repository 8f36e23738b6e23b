"""The checkpoints a run starts from, made sure of before the run has a directory (issue 27).

Every hub id the resolved configuration names (``init_from``, a distillation teacher, a
retriever's encoder, a tagger, a vocabulary reference: any ``hf:<org>/<name>[@<revision>]``
value) is resolved into the Hugging Face cache, downloaded where it is missing and the hub is
reachable (``datamodules.hub``), and ``init_from``'s Hugging Face checkpoint is read whole
(``lit_models.interop.hf_check.check_checkpoint``). What cannot be (offline and not cached, a
mistyped id or revision, an architecture or a weight plmbench has no place for) is one
``PlmbenchError`` line, and the run leaves nothing behind (``bench.run.execute.run_one``).
"""

import contextlib
from collections.abc import Iterator

from omegaconf import DictConfig

from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from lit_models.archs import Arch, get_model
from lit_models.interop.hf_check import check_checkpoint


def hub_settings(config: object, key: str = "") -> Iterator[tuple[str, InitFrom]]:
    """(dotted key, checkpoint) of every value of the resolved ``config`` that names a hub id:
    ``init_from``, a distillation teacher, a retriever's encoder, a tagger ..."""
    if isinstance(config, dict):
        for name, value in config.items():
            yield from hub_settings(value, f"{key}.{name}" if key else str(name))
    elif isinstance(config, list):
        for i, value in enumerate(config):
            yield from hub_settings(value, f"{key}.{i}")
    elif isinstance(config, str) and config.startswith("hf:"):
        with contextlib.suppress(PlmbenchError):  # a text that is no checkpoint setting
            start = InitFrom.parse(config, key)
            if start.hub_id is not None:
                yield key, start


def resolve_checkpoints(cfg: DictConfig, config: dict, start: InitFrom) -> None:
    """Before the run has a directory: every hub id the configuration names resolved into the
    Hugging Face cache (downloaded where missing and the hub is reachable; ``datamodules.hub``),
    and ``init_from``'s Hugging Face checkpoint read whole (``check_checkpoint``: an architecture
    or a weight plmbench has no place for is refused here, in one line, leaving nothing).
    ``start``: ``init_from`` as ``bench.run.config_check.check_config`` parsed it."""
    if start.hub_id is not None:
        start.directory("init_from")
    for setting, hub in hub_settings({k: v for k, v in config.items() if k != "init_from"}):
        hub.directory(setting)
    model = get_model(cfg.model.arch)
    if start.kind == "hf" and isinstance(model, Arch):
        check_checkpoint(start.directory(), model)
