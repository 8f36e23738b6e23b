"""The architecture registry: every architecture plmbench implements, by preset name (``arch``)
and by transformers' ``model_type``. The built-in ones are registered here; adding one is a file
in this folder plus a line below, or, from outside the package (a plugin, a test), a
``register_arch`` call (``spec.py`` says what a registration holds)."""

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
from lit_models.archs.spec import (
    ARCHS,
    Arch,
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

__all__ = ["ARCHS", "Arch", "Capabilities", "HFLayout", "Model", "arch_of_model_type",
           "archs_with", "get_arch", "register_arch"]
