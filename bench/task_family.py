"""A task's family and a run's other config-named parts, built from their ``_target_``."""

import hydra
from omegaconf import DictConfig, OmegaConf

from datamodules.errors import PlmbenchError
from lit_models.core.family import TaskFamily


def instantiated(node: DictConfig, base: type, what: str, fix: str):
    """``node``'s ``_target_`` built, an instance of ``base``; else one line naming ``what`` and
    ``fix`` (a PlmbenchError the class raised on its arguments as it is)."""
    try:
        built = hydra.utils.instantiate(node)
    except Exception as err:
        if isinstance(err.__cause__, PlmbenchError):
            raise err.__cause__ from None
        raise PlmbenchError(f"{what} {OmegaConf.to_container(node)} cannot be built "
                            f"({type(err).__name__}); {fix}") from None
    if not isinstance(built, base):
        raise PlmbenchError(f"{what}._target_ must name a {base.__name__} subclass")
    return built


def task_family(task: DictConfig) -> TaskFamily:
    """The task's family, as its YAML names it (``family._target_``)."""
    return instantiated(task.family, TaskFamily, f"task {task.name}: family",
                        "name a TaskFamily class in family._target_")
