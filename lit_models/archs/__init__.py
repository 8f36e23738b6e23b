"""The architecture registry: every architecture plmbench implements, by preset name (``arch``)
and by transformers' ``model_type``. It is found, not listed (``datamodules/discovery.py``): every
module of this folder that defines an ``ARCH`` is registered, in name order, and so is every
architecture an installed distribution names under the ``plmbench.archs`` entry-point group (an
``Arch``, or a module with an ``ARCH``). Adding one is its file in this folder, or a plugin's own
distribution; ``register_arch`` registers one by hand (a test's) (``spec.py`` says what a
registration holds)."""

from datamodules.discovery import folder_modules, plugins
from datamodules.errors import PlmbenchError
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

#: the entry-point group under which a distribution names its architectures
ARCH_GROUP = "plmbench.archs"


def find_archs() -> list[str]:
    """Register the architectures of this folder and of the ``ARCH_GROUP`` plugins that are not
    registered yet; the names of those it registered."""
    found = []
    for source in (*folder_modules(__name__), *plugins(ARCH_GROUP)):
        arch = getattr(source, "ARCH", source)
        if isinstance(arch, Arch) and ARCHS.get(arch.name) is not arch:
            found.append(register_arch(arch).name)
    return found


find_archs()

#: the models that are no Transformer, by preset name (``arch``)
BASELINES: dict[str, Baseline] = {baseline.name: baseline for baseline in _BASELINES}

__all__ = ["ARCHS", "ARCH_GROUP", "BASELINES", "Arch", "Baseline", "Capabilities", "HFLayout",
           "Model", "arch_of_model_type", "archs_with", "find_archs", "get_arch", "get_model",
           "models_of_kinds", "register_arch"]


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
