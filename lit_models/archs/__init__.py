"""The architecture registry: every architecture plmbench implements, by preset name (``arch``)
and by transformers' ``model_type``. The built-in ones are registered here; adding one is a file
in this folder plus a line below, or, from outside the package (a plugin, a test), a
``register_arch`` call (``spec.py`` says what a registration holds)."""

from datamodules.errors import PlmbenchError
from lit_models.archs import (
    albert,
    bart,
    bert,
    deberta,
    deberta_v2,
    distilbert,
    electra,
    gpt,
    longformer,
    roberta,
    spanbert,
    t5,
    xlnet,
)
from lit_models.archs.baselines import BASELINES as _BASELINES
from lit_models.archs.spec import (
    ARCHS,
    Arch,
    Baseline,
    Capabilities,
    HFLayout,
    Model,
    arch_of_model_type,
    archs_with,
    get_arch,
    register_arch,
)

for _module in (bert, roberta, albert, distilbert, electra, spanbert, deberta, bart, longformer,
                xlnet, gpt, t5):
    register_arch(_module.ARCH)
register_arch(deberta_v2.ARCH)

#: the models that are no Transformer, by preset name (``arch``)
BASELINES: dict[str, Baseline] = {baseline.name: baseline for baseline in _BASELINES}

__all__ = ["ARCHS", "BASELINES", "Arch", "Baseline", "Capabilities", "HFLayout", "Model",
           "arch_of_model_type", "archs_with", "get_arch", "get_model", "models_of_kinds",
           "register_arch"]


def get_model(name: str) -> Arch | Baseline:
    """What a model preset's ``arch`` names: a Transformer architecture or a baseline family."""
    if name in BASELINES:
        return BASELINES[name]
    if name not in ARCHS:
        raise PlmbenchError(f"model.arch={name!r} is not implemented: use one of "
                            f"{[*ARCHS, *BASELINES]}")
    return ARCHS[name]


def models_of_kinds(kinds: tuple[str, ...]) -> list[str]:
    """The names of the architectures and baselines of ``kinds``, sorted."""
    return sorted(m.name for m in (*ARCHS.values(), *BASELINES.values()) if m.kind in kinds)
