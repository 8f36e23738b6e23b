"""``finetune=adapters``: Houlsby et al. 2019, "Parameter-Efficient Transfer Learning for NLP"
(§2.1, Figure 2). A bottleneck adapter (``lit_models/nets/adapters.py``) goes after the attention
and after the feed-forward sub-layer of every Transformer layer of the net (encoder and, for an
encoder-decoder, decoder, whose cross-attention gets one too); only the adapters, the layer norms
and the task head train (§2.1: "the parameters of the layer normalization are also trained").
The adapters start as the identity, so before any step the net computes what it computed
pretrained. Nets built of ``TransformerLayer`` blocks (``lit_models/nets/blocks.py``) have the
adapter slots; others are refused in one line.
"""

from torch import nn

from datamodules.errors import PlmbenchError
from lit_models.core.finetune import FinetuneMethod, freeze_except
from lit_models.nets.adapters import BottleneckAdapter
from lit_models.nets.blocks import TransformerLayer


class Adapters(FinetuneMethod):
    exportable = False
    def __init__(self, name: str = "adapters", bottleneck: int = 64, hidden_act: str = "gelu",
                 init_std: float = 1e-2) -> None:
        super().__init__(name)
        if bottleneck < 1:
            raise PlmbenchError(f"finetune.bottleneck={bottleneck}: give it a size >= 1")
        self.bottleneck, self.hidden_act, self.init_std = bottleneck, hidden_act, init_std

    def prepare(self, net: nn.Module) -> None:
        layers = [m for m in net.modules() if isinstance(m, TransformerLayer)]
        if not layers:
            raise PlmbenchError(f"{type(net).__name__} has no TransformerLayer blocks to put "
                                "adapters in; use finetune=full or finetune=frozen with it")
        for layer in layers:  # a layer shared by several depths (ALBERT) gets one pair
            width = layer.ffn_norm.normalized_shape[0]
            slots = ["attention_adapter", "ffn_adapter"]
            if layer.cross_attention is not None:
                slots.append("cross_attention_adapter")
            for slot in slots:
                setattr(layer, slot, BottleneckAdapter(width, self.bottleneck, self.hidden_act,
                                                       self.init_std))
        freeze_except(net, (BottleneckAdapter, nn.LayerNorm, nn.RMSNorm))
