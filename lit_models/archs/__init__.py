"""The architecture registry: every architecture plmbench implements, by preset name (``arch``)
and by transformers' ``model_type``. Adding one is a file in this folder plus a line here."""

from datamodules.errors import PlmbenchError
from lit_models.archs import (
    albert,
    bart,
    bert,
    deberta,
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
from lit_models.archs.spec import Arch, Baseline, HFLayout

ARCHS: dict[str, Arch] = {
    arch.name: arch
    for arch in (
        bert.ARCH,
        roberta.ARCH,
        albert.ARCH,
        distilbert.ARCH,
        electra.ARCH,
        spanbert.ARCH,
        deberta.ARCH,
        bart.ARCH,
        longformer.ARCH,
        xlnet.ARCH,
        gpt.ARCH,
        t5.ARCH,
    )
}

#: the models that are no Transformer, by preset name (``arch``)
BASELINES: dict[str, Baseline] = {baseline.name: baseline for baseline in _BASELINES}

__all__ = ["ARCHS", "BASELINES", "Arch", "Baseline", "HFLayout", "get_arch", "get_model",
           "arch_of_model_type", "arch_of_net", "models_of_kinds"]


def get_arch(name: str) -> Arch:
    if name not in ARCHS:
        raise PlmbenchError(f"model.arch={name!r} is not implemented: use one of {list(ARCHS)}")
    return ARCHS[name]


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


def arch_of_model_type(model_type: str | None) -> Arch:
    """The architecture of a transformers config.json's ``model_type``."""
    for arch in ARCHS.values():
        if arch.hf.model_type == model_type:
            return arch
    known = [arch.hf.model_type for arch in ARCHS.values()]
    raise PlmbenchError(
        f"checkpoint has model_type {model_type!r}; plmbench imports {known}: point init_from at "
        "a checkpoint of one of those"
    )


def arch_of_net(net) -> Arch:
    """The architecture whose encoder, pretraining net or masked-LM net ``net`` is."""
    for arch in ARCHS.values():
        if type(net) in (arch.encoder, arch.pretraining, arch.masked_lm):
            return arch
    raise PlmbenchError(f"{type(net).__name__} is no registered architecture's net")
