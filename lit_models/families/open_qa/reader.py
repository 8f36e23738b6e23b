"""What an open-domain QA reader is to the ``OpenQA`` family (``task.readers`` in the task YAML)."""

from collections.abc import Mapping

from datamodules.init_from import InitFrom
from lit_models.archs import Model


class Reader:
    """An open-QA reader, named by ``_target_`` under the task YAML's ``readers`` and picked by
    ``task.reader``: the architecture kinds it reads with, whether it reads retrieved passages,
    whether the net is built with its pretraining heads (a generator's LM head), and ``build``
    (the composed config, the run's ``Model``) -> (LightningModule, DataModule)."""

    kinds: tuple[str, ...] = ("encoder",)
    retrieves: bool = True
    with_heads: bool = False

    def build(self, cfg: Mapping, model: Model, init_from: InitFrom) -> tuple:
        raise NotImplementedError
