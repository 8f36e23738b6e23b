"""Probing classifiers: what a frozen encoder's layers encode, read off by small trained probes.

- Liu et al. 2019 ("Linguistic Knowledge and Transferability of Contextual Representations",
  §3): a linear probe trained on each layer's frozen representations, its accuracy per layer;
  Tenney et al. 2019 ("What do you learn from context?", §3.2) use a one-hidden-layer MLP
  (``probe: mlp``).
- Tenney et al. 2019 ("BERT Rediscovers the Classical NLP Pipeline", §3, eq. 1): one probe over a
  scalar mix of every layer, s = softmax(w) learned with it (``lit_models/nets/scalar_mix.py``);
  the mix's centre of gravity E_s[l] = Σ_l l s_l says at which depth the task is resolved.
- Hewitt & Liang 2019 ("Designing and Interpreting Probes with Control Tasks", §2-3): a control
  task gives each word type a label of its own, drawn once from the task's label distribution,
  so only memorisation can learn it; selectivity = the task's accuracy minus the control task's,
  with the same probe and features.

Features are [N, layers, H] tensors (one row per labelled word, edge or sentence); training is
minibatch Adam over a fixed number of epochs on the training features, accuracy on the eval
features after the last epoch (nothing is selected on them).
"""

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.errors import PlmbenchError
from lit_models.nets.scalar_mix import ScalarMix

PROBES = ("linear", "mlp")


@dataclass(frozen=True)
class ProbeSettings:
    """How every probe of a run trains (the task YAML's ``probe`` block)."""

    kind: str = "linear"  # linear | mlp
    hidden: int = 256  # the MLP's hidden units
    dropout: float = 0.0  # on the MLP's hidden layer
    epochs: int = 10
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in PROBES:
            raise PlmbenchError(f"task.probe.kind={self.kind}: use one of {list(PROBES)}")
        if min(self.epochs, self.batch_size, self.hidden) < 1 or self.lr <= 0:
            raise PlmbenchError("task.probe: epochs, batch_size and hidden must be positive "
                                f"and lr above 0 (got {self})")

    @classmethod
    def from_config(cls, probe: dict, seed: int) -> "ProbeSettings":
        """The task YAML's ``probe`` block; PlmbenchError naming an unknown key."""
        known = {f.name for f in fields(cls)} - {"seed"}
        if unknown := sorted(set(probe) - known):
            raise PlmbenchError(f"task.probe: unknown keys {unknown}; known: {sorted(known)}")
        return cls(**probe, seed=seed)


def classifier(settings: ProbeSettings, width: int, labels: int) -> nn.Module:
    """A linear layer, or Linear -> ReLU -> Dropout -> Linear."""
    if settings.kind == "linear":
        return nn.Linear(width, labels)
    return nn.Sequential(nn.Linear(width, settings.hidden), nn.ReLU(),
                         nn.Dropout(settings.dropout), nn.Linear(settings.hidden, labels))


class MixedProbe(nn.Module):
    """A probe over the scalar mix of every layer's features [N, layers, H]."""

    def __init__(self, settings: ProbeSettings, layers: int, width: int, labels: int) -> None:
        super().__init__()
        self.mix = ScalarMix(layers)
        self.probe = classifier(settings, width, labels)

    def forward(self, features: Tensor) -> Tensor:
        return self.probe(self.mix(features.transpose(0, 1)[:, :, None])[:, 0])


def train_probe(probe: nn.Module, features: Tensor, labels: Tensor, settings: ProbeSettings
                ) -> nn.Module:
    """``probe`` trained on float ``features`` [N, ...] -> ``labels`` [N] (cross-entropy)."""
    generator = torch.Generator().manual_seed(settings.seed)
    optimizer = torch.optim.Adam(probe.parameters(), lr=settings.lr,
                                 weight_decay=settings.weight_decay)
    probe.train()
    for _ in range(settings.epochs):
        for batch in torch.randperm(len(labels), generator=generator).split(settings.batch_size):
            loss = F.cross_entropy(probe(features[batch].float()), labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return probe.eval()


@torch.no_grad()
def accuracy(probe: nn.Module, features: Tensor, labels: Tensor, batch_size: int = 4096
             ) -> float:
    correct = sum(int((probe(f.float()).argmax(-1) == y).sum())
                  for f, y in zip(features.split(batch_size), labels.split(batch_size),
                                  strict=True))
    return correct / max(len(labels), 1)


def layer_accuracies(train: Tensor, train_labels: Tensor, test: Tensor, test_labels: Tensor,
                     labels: int, settings: ProbeSettings) -> list[float]:
    """Accuracy of one probe per layer, each trained on that layer's features alone."""
    scores = []
    for layer in range(train.shape[1]):
        torch.manual_seed(settings.seed)
        probe = train_probe(classifier(settings, train.shape[-1], labels), train[:, layer],
                            train_labels, settings)
        scores.append(accuracy(probe, test[:, layer], test_labels))
    return scores


def mixed_accuracy(train: Tensor, train_labels: Tensor, test: Tensor, test_labels: Tensor,
                   labels: int, settings: ProbeSettings) -> tuple[float, list[float]]:
    """(accuracy, the mix's layer weights s) of one probe over the scalar mix of every layer."""
    torch.manual_seed(settings.seed)
    probe = train_probe(MixedProbe(settings, train.shape[1], train.shape[-1], labels), train,
                        train_labels, settings)
    return accuracy(probe, test, test_labels), probe.mix.weights.tolist()


def centre_of_gravity(weights: Sequence[float]) -> float:
    """E_s[l] = Σ_l l s_l (Tenney et al. 2019, §3): the mix's expected layer."""
    return float(sum(layer * weight for layer, weight in enumerate(weights)))


def control_labels(types: Sequence[str], labels: Tensor, seed: int = 0) -> dict[str, int]:
    """Hewitt & Liang's control task: a label for each word type of ``types`` (those of every
    split), drawn once from the empirical distribution of ``labels`` (the training items')."""
    generator = torch.Generator().manual_seed(seed)
    distribution = torch.bincount(labels).float()
    vocabulary = sorted(set(types))
    drawn = torch.multinomial(distribution, len(vocabulary), replacement=True,
                              generator=generator)
    return dict(zip(vocabulary, drawn.tolist(), strict=True))
