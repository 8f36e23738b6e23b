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
from lit_models.archs.spec import Arch, HFLayout

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

__all__ = ["ARCHS", "Arch", "HFLayout", "get_arch", "arch_of_model_type", "arch_of_net"]


def get_arch(name: str) -> Arch:
    if name not in ARCHS:
        raise PlmbenchError(f"model.arch={name!r} is not implemented: use one of {list(ARCHS)}")
    return ARCHS[name]


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
