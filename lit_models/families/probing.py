"""Probing a frozen encoder, layer by layer (``family: probing``; ``conf/task/probing/*.yaml``).

The encoder (any checkpoint, or a random one from ``init_from=scratch``: the baseline of an
untrained net) reads every example once, frozen (``lit_models/core/features.py``: the L + 1
hidden states); each labelled word (at its first sub-token), edge (the dependent's and the
head's states concatenated, Tenney et al. 2019's edge probing over one-word spans) or sentence
(the mean of its tokens' states, special tokens aside) gives a feature per layer. Then, on the
training split's features (``lit_models/families/probes.py``): one probe per layer (Liu et al. 2019;
linear, or Tenney et al.'s MLP), one over the scalar mix of all layers with its weights and
centre of gravity (Tenney et al. 2019, §3), and, for word-level tasks, the same probes on
Hewitt & Liang's control task, whose accuracy the task's is read against (selectivity).

The record's metrics hold, on the eval split, ``layer_<l>`` (accuracy of layer l's probe),
``mix``, ``centre_of_gravity``, ``best_layer`` and, with a control task, ``control_<l>`` and
``selectivity_<l>``; its ``analysis`` the same as lists, with the mix's weights. The
``probing`` board draws each task's accuracy against the layer, one curve per model.
"""

from collections.abc import Mapping

import torch

from datamodules import pretrain, probing
from datamodules.collate import encoder_inputs
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from lit_models.archs import Model
from lit_models.core.family import TaskFamily, check_max_length
from lit_models.core.features import hidden_states
from lit_models.core.module import PlmModule
from lit_models.families.probes import (
    ProbeSettings,
    centre_of_gravity,
    control_labels,
    layer_accuracies,
    mixed_accuracy,
)


class LitProbing(PlmModule):
    """Reads the frozen encoder's states: ``predict_step`` gives, per example, the states of its
    words' first sub-tokens [L + 1, words, H] (word-level tasks) or of the mean of its
    non-special tokens [L + 1, H] (sentence tasks), in half precision on the CPU."""

    def __init__(self, net, kind: str, sentence: bool, special_ids) -> None:
        super().__init__({}, net.config.num_hidden_layers)
        self.net, self.kind, self.sentence = net.requires_grad_(False), kind, sentence
        self.special_ids = sorted(special_ids)

    def predict_step(self, batch, batch_idx: int, dataloader_idx: int = 0):
        inputs = encoder_inputs(batch)
        if self.kind == "decoder":  # a decoder's token types are extra token embeddings
            inputs["token_type_ids"] = None
        states = hidden_states(self.net, inputs).float()  # [L + 1, B, T, H]
        out = []
        for b, index in enumerate(batch["index"].tolist()):
            if self.sentence:
                ids = batch["input_ids"][b]
                keep = ~torch.isin(ids, torch.tensor(self.special_ids, device=ids.device))
                if "attention_mask" in batch:
                    keep &= batch["attention_mask"][b].bool()
                out.append((index, states[:, b, keep].mean(1).half().cpu(), None))
            else:
                word_ids = batch["word_ids"][b]
                first = (word_ids >= 0).nonzero().flatten()
                out.append((index, states[:, b, first].half().cpu(), word_ids[first].cpu()))
        return out


def word_features(items: list[probing.Item], read: dict[int, tuple], kind: str
                  ) -> tuple[torch.Tensor, list[str], list[str]]:
    """(features [N, L + 1, H or 2H], labels, word types) of every target whose words were
    read (``read``: example index -> (states [L + 1, words, H], their word indices))."""
    features, labels, types = [], [], []
    for index, item in enumerate(items):
        states, words = read[index]
        if kind == "sentence":
            features.append(states)
            labels.append(item.targets[0])
            types.append("")
            continue
        position = {int(w): p for p, w in enumerate(words)}
        for target in item.targets:
            if any(word not in position for word in target[:-1]):
                continue  # a word past max_length
            parts = [states[:, position[word]] for word in target[:-1]]
            features.append(torch.cat(parts, -1))
            labels.append(target[-1])
            types.append(item.words[target[0]].lower())
    if not features:
        raise PlmbenchError("no probing target within max_length tokens; raise task.max_length")
    return torch.stack(features), labels, types


class Probing(TaskFamily):
    kinds = ("encoder", "decoder")

    def vocabulary_corpus(self, task):
        if task["kind"] == "sentence":
            return pretrain.vocabulary_corpus(task["text"])
        items = probing.labelled_items(task, task["probe_train"], "max_train_samples")
        return f"probing:{task['name']}", (" ".join(item.words) for item in items)

    def check_arch(self, arch, task):
        """Also the task's kind and probe settings, before anything is read."""
        super().check_arch(arch, task)
        if task["kind"] not in probing.KINDS:
            raise PlmbenchError(f"task {task['name']}: kind {task['kind']!r}; use one of "
                                f"{list(probing.KINDS)}")
        ProbeSettings.from_config(dict(task["probe"]), seed=0)

    def build(self, cfg, model: Model, init_from: InitFrom):
        task, (arch, net, tokenizer) = cfg["task"], model
        check_max_length(task, net)
        self.settings = ProbeSettings.from_config(dict(task["probe"]), cfg["seed"])
        if task["kind"] == "sentence":
            items, self.names = probing.sentence_items(task)
        else:
            items = {"train": probing.labelled_items(task, task["probe_train"],
                                                     "max_train_samples"),
                     "eval": probing.labelled_items(task, task["splits"]["eval"][0],
                                                    "max_eval_samples")}
            self.names = list(task["label_names"] or []) or None  # else the training split's
        self.items, self.findings = items, None
        dm = probing.ProbingDataModule(task, tokenizer, items, cfg["seed"])
        module = LitProbing(net, arch.kind, task["kind"] == "sentence",
                            tokenizer.special.ids)
        return module, dm

    def predict(self, trainer, module, dm, run_dir, cfg) -> dict[str, str]:
        task = cfg["task"]
        settings = self.settings
        dm.trainer = trainer  # each process reads its share of the examples
        data = {}
        for split, loader in dm.loaders().items():
            batches = module.gather_batches(trainer.predict(module, loader))
            read = {i: (states, words) for batch in batches for i, states, words in batch}
            data[split] = word_features(self.items[split], read, task["kind"])
        names = self.names or sorted(set(data["train"][1]))
        index = {name: i for i, name in enumerate(names)}
        (train, train_names, train_types), (test, test_names, test_types) = (data["train"],
                                                                               data["eval"])
        known = torch.tensor([name in index for name in test_names])  # unseen labels: wrong
        y_train = torch.tensor([index[n] for n in train_names])
        y_test = torch.tensor([index.get(n, -1) for n in test_names])
        scores = layer_accuracies(train, y_train, test, y_test, len(names), settings)
        mix, weights = mixed_accuracy(train, y_train, test, y_test, len(names), settings)
        findings = {"labels": names, "train_items": len(y_train), "eval_items": len(y_test),
                    "unseen_eval_labels": int((~known).sum()), "layers": scores,
                    "mix": mix, "mix_weights": weights,
                    "centre_of_gravity": centre_of_gravity(weights),
                    "best_layer": int(torch.tensor(scores).argmax())}
        if task["kind"] != "sentence" and task["control"]:
            control = control_labels(train_types + test_types, y_train, cfg["seed"])
            findings["control"] = layer_accuracies(
                train, torch.tensor([control[t] for t in train_types]), test,
                torch.tensor([control[t] for t in test_types]), len(names), settings)
            findings["selectivity"] = [a - c for a, c in
                                       zip(scores, findings["control"], strict=True)]
        self.findings = findings
        module.last_metrics = {task["splits"]["eval"][0]: flat_metrics(findings)}
        return {}

    def analysis(self, module):
        return self.findings

    def export(self, module, model, run_dir, cfg) -> None:
        """Nothing: the encoder is frozen, the probes are the record's numbers."""


def flat_metrics(findings: Mapping) -> dict[str, float]:
    """The record's metrics: per layer, the mix, its centre of gravity, the best layer."""
    metrics = {f"layer_{i}": a for i, a in enumerate(findings["layers"])}
    metrics |= {"mix": findings["mix"], "centre_of_gravity": findings["centre_of_gravity"],
                "best_layer": float(findings["best_layer"])}
    for name in ("control", "selectivity"):
        metrics |= {f"{name}_{i}": a for i, a in enumerate(findings.get(name, []))}
    if "selectivity" in findings:
        metrics["selectivity_max"] = max(findings["selectivity"])
    return metrics
