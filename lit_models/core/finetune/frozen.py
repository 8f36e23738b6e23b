"""``finetune=frozen``: the feature-based use of a pretrained encoder (Devlin et al. 2019, §5.3,
Table 7): its weights never change, only the task head on its features trains.

The features are chosen layers of the encoder (``layers``: indices into its L + 1 hidden states,
0 the embeddings, -1 the last layer), combined (``combine``, ``lit_models/core/features.py``'s
names): ``last`` (one layer), ``sum`` (Table 7's "sum last four hidden"), or ``mix``, a learned
scalar mix (Peters et al. 2018, §3.2, eq. 1; ``lit_models/nets/scalar_mix.py``), which trains with
the head. Table 7's concatenation of the last four widens the features fourfold, which a task
head sized to the encoder cannot read: it feeds a BiLSTM (the ``bilstm`` models' frozen-encoder
inputs, ``model.inputs.encoder``: ``lit_models/core/features.py``'s ``LayerFeatures``).

The combined layers replace the encoder output's ``last_hidden_state`` (through forward hooks, so
the net stays the architecture's own class and every family reads it as before); a combination
other than the last layer alone has no pooled output, so a head pools its first token. The
encoder runs in eval mode throughout (no dropout: the features of a frozen model are fixed).
"""

from collections.abc import Sequence
from dataclasses import replace

import lightning as L
import torch
from torch import nn

from datamodules.errors import PlmbenchError
from lit_models.core.features import COMBINE, layer_indices
from lit_models.core.finetune import FinetuneMethod
from lit_models.nets.scalar_mix import ScalarMix


class LayerCombination(nn.Module):
    """The encoder's hidden states of ``layers`` (indices into ``num_states``) combined by sum,
    or by a learned scalar mix with ``mix``."""

    def __init__(self, layers: Sequence[int], num_states: int, mix: bool) -> None:
        super().__init__()
        self.layers = layer_indices(layers, num_states)
        self.mix = ScalarMix(len(self.layers)) if mix else None

    def forward(self, hidden_states: Sequence[torch.Tensor]) -> torch.Tensor:
        states = torch.stack([hidden_states[i] for i in self.layers])
        return states.sum(0) if self.mix is None else self.mix(states)


class KeepEval(L.Callback):
    """Put the frozen ``net`` back in eval mode whenever Lightning sets the module training."""

    def __init__(self, net: nn.Module) -> None:
        self.net = net

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.net.eval()


class Frozen(FinetuneMethod):
    def __init__(self, name: str = "frozen", layers: Sequence[int] = (-1,),
                 combine: str = "last") -> None:
        super().__init__(name)
        if combine not in COMBINE:
            raise PlmbenchError(f"finetune.combine={combine!r}: use one of {list(COMBINE)}")
        if combine == "concat":
            raise PlmbenchError("finetune.combine=concat widens the features beyond the task "
                                "head's input; use sum or mix here, or a bilstm model over the "
                                "frozen encoder's concatenated layers (model=bilstm-small "
                                "model.inputs.encoder=hf:<dir> model.inputs.encoder_combine="
                                "concat)")
        if combine == "last" and len(layers) != 1:
            raise PlmbenchError(f"finetune.combine=last takes one layer, got {list(layers)}; "
                                "use sum or mix for several")
        self.layers, self.combine = list(layers), combine
        #: the encoder's own output is exported as it is; a combination of layers is not
        self.exportable = self.combine == "last" and self.layers == [-1]

    def prepare(self, net: nn.Module) -> None:
        net.requires_grad_(False).eval()
        if self.exportable:
            return  # the encoder's own output
        num_states = net.config.num_hidden_layers + 1
        net.frozen_features = LayerCombination(self.layers, num_states, self.combine == "mix")
        net.register_forward_pre_hook(_with_hidden_states, with_kwargs=True)
        net.register_forward_hook(_combined_output)

    def apply(self, module, net) -> None:
        module.finetune_callbacks.append(KeepEval(net))


def _with_hidden_states(net: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Ask the encoder for every layer's states, remembering whether its caller did."""
    net.frozen_features.caller_wants_states = kwargs.get("output_hidden_states", False)
    return args, {**kwargs, "output_hidden_states": True}


def _combined_output(net: nn.Module, args: tuple, output):
    """The output with the combined layers for ``last_hidden_state`` and no pooled state."""
    features = net.frozen_features
    if output.hidden_states is None:
        raise PlmbenchError(f"{type(net).__name__} returns no hidden states; finetune=frozen "
                            "with chosen layers needs an encoder that does")
    states = output.hidden_states if features.caller_wants_states else None
    return replace(output, last_hidden_state=features(output.hidden_states), pooler_output=None,
                   hidden_states=states)
