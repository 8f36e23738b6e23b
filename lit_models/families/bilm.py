"""ELMo's biLM pretraining (Peters et al. 2018, §3.1, §3.4): forward and backward language models
over a corpus's sentences, sharing the character-CNN token representation and the softmax
(``lit_models/nets/elmo.py``), the sum of both directions' log likelihoods maximised jointly.

``BiLMPretraining`` is the family of the ``bilm`` kind on the corpus tasks
(``conf/task/pretrain/``): the softmax's vocabulary is the training text's ``model.vocab_size``
most frequent words (at least ``model.min_count`` occurrences, cased), the held-out sentences are
scored per word: the mean negative log likelihood of each direction (``forward_loss``,
``backward_loss``; their mean ``loss``), their perplexities, and ``perplexity``, the average of
the two as §3.4 reports it (39.7 for the released model on the 1B Word Benchmark). A word
outside the vocabulary is predicted as <unk>. The biLM is written to ``<run dir>/model/``
(config.json, model.safetensors, the vocabulary): ``load_elmo`` reads it back, for the BiLSTM
baselines' ELMo input and the contextual neighbours (``bench/boards/neighbours.py``).
"""

import json
from collections.abc import Mapping
from dataclasses import asdict, fields
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torchmetrics import SumMetric

from datamodules import strict_json
from datamodules.bilm import BiLMDataModule, split_sentences
from datamodules.collate import token_mask
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_path, atomic_write_text
from datamodules.init_from import EXPORT_DIR, InitFrom
from datamodules.words import WordVocabulary, cached_vocabulary
from lit_models.archs import Model
from lit_models.core.family import TaskFamily
from lit_models.core.module import PlmModule
from lit_models.metrics import exact_total
from lit_models.nets.elmo import ElmoConfig, ElmoLanguageModel

CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"


def elmo_config(model: Mapping, vocab_size: int, pad_token_id: int) -> ElmoConfig:
    """The preset's fields of ``ElmoConfig``'s names, with the vocabulary's size."""
    names = {f.name for f in fields(ElmoConfig)}
    values = {k: v for k, v in model.items() if k in names}
    try:
        return ElmoConfig(**{**values, "vocab_size": vocab_size, "pad_token_id": pad_token_id})
    except (TypeError, ValueError) as err:
        raise PlmbenchError(f"model={model.get('name')}: {err}") from None


class LitBiLM(PlmModule):
    def __init__(self, net: ElmoLanguageModel, optim: Mapping, eval_splits: list[str]) -> None:
        super().__init__(optim, net.config.num_layers)
        self.net = net
        self.eval_splits = list(eval_splits)
        sums = ("forward_nll", "backward_nll", "predictions")
        self.sums = torch.nn.ModuleList(
            torch.nn.ModuleDict({k: exact_total(SumMetric()) for k in sums})
            for _ in eval_splits)

    def losses(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return self.net.losses(batch["char_ids"], batch["input_ids"], token_mask(batch))

    def training_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        out = self.losses(batch)
        loss = (out["forward_nll"] + out["backward_nll"]) / (2 * out["predictions"])
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        out, sums = self.losses(batch), self.sums[dataloader_idx]
        sums["forward_nll"].update(out["forward_nll"])
        sums["backward_nll"].update(out["backward_nll"])
        sums["predictions"].update(out["predictions"])

    def on_validation_epoch_end(self) -> None:
        for split, sums in zip(self.eval_splits, self.sums, strict=True):
            if not self.trainer.sanity_checking:
                count = float(sums["predictions"].compute())
                forward = float(sums["forward_nll"].compute()) / count
                backward = float(sums["backward_nll"].compute()) / count
                ppl_f, ppl_b = torch.tensor([forward, backward]).exp().tolist()
                self.record_metrics(split, {
                    "forward_loss": forward, "backward_loss": backward,
                    "loss": (forward + backward) / 2, "forward_perplexity": ppl_f,
                    "backward_perplexity": ppl_b, "perplexity": (ppl_f + ppl_b) / 2})
            for metric in sums.values():
                metric.reset()


def save_elmo(net: ElmoLanguageModel, vocab: WordVocabulary, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with atomic_path(directory / WEIGHTS_FILE) as partial:
        save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(partial))
    atomic_write_text(directory / CONFIG_FILE, strict_json.dumps(
        {"arch": "elmo", **asdict(net.config)}, indent=2) + "\n")
    vocab.save(directory)


def load_elmo(checkpoint: str) -> tuple[ElmoLanguageModel, WordVocabulary]:
    """The biLM a run saved, from ``ckpt:<run dir>`` (or its ``model/`` directory)."""
    where = checkpoint if ":" in checkpoint else f"ckpt:{checkpoint}"
    directory = InitFrom.parse(where, "elmo", pretrained=True).directory("elmo")
    config_file = directory / CONFIG_FILE
    config = json.loads(config_file.read_text()) if config_file.is_file() else {}
    if config.pop("arch", None) != "elmo":
        raise PlmbenchError(f"{checkpoint}: no ELMo biLM at {directory} (expected {CONFIG_FILE} "
                            "of a run with model=elmo-*); point at an ELMo pretraining run")
    net = ElmoLanguageModel(ElmoConfig(**config))
    net.load_state_dict(load_file(str(directory / WEIGHTS_FILE)))
    return net, WordVocabulary.load(directory)


class BiLMPretraining(TaskFamily):
    kinds = ("bilm",)
    #: (key, split -> sentences) read by ``build_net`` for the vocabulary, handed to the data
    sentences: tuple[str, dict[str, list[str]]] | None = None

    def build_net(self, cfg: Mapping, arch, init_from: InitFrom) -> Model:
        model, task = cfg["model"], cfg["task"]
        if not init_from.scratch:
            raise PlmbenchError(f"model={model['name']}: the biLM pretrains from scratch; set "
                                "init_from=scratch")
        self.sentences = split_sentences(task)
        key, sentences = self.sentences
        vocab = cached_vocabulary(key, lambda: iter(sentences["train"]), model["vocab_size"],
                                  model["min_count"], model["lowercase"])
        net = ElmoLanguageModel(elmo_config(model, len(vocab), vocab.pad))
        return Model(arch, net, vocab)

    def build(self, cfg, model: Model, init_from: InitFrom):
        _, net, vocab = model
        dm = BiLMDataModule(cfg["task"], vocab, cfg["seed"], self.sentences)
        return LitBiLM(net, cfg["optim"], dm.eval_split_names), dm

    def export(self, module, model: Model, run_dir, cfg) -> None:
        """The pretrained biLM is what the run makes: always written."""
        save_elmo(module.net, model.tokenizer, run_dir / EXPORT_DIR)


def occurrence_vectors(encoder, sentences: list[list[str]], word: str, layer: int,
                       batch_size: int = 32) -> tuple[list[tuple[int, int]], torch.Tensor]:
    """The biLM's ``layer`` (an index into its L + 1 layers) at every occurrence of ``word`` in
    ``sentences`` (lists of words): ((sentence, position) of each, vectors [N, 2 x projection])."""
    from datamodules.bilm import collate_sentences
    from datamodules.words import BOS, EOS

    places = [(i, j) for i, words in enumerate(sentences) for j, w in enumerate(words) if w == word]
    rows = sorted({i for i, _ in places})
    vectors = []
    encoder.eval()
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        batch = collate_sentences([{"input_ids": [0] * (len(sentences[i]) + 2),
                                    "words": " ".join([BOS, *sentences[i], EOS])}
                                   for i in chunk], pad_id=0)
        with torch.no_grad():
            states = encoder(batch["char_ids"]).layers[layer]
        vectors += [states[r, j + 1] for r, i in enumerate(chunk)  # + 1: after <S>
                    for j, w in enumerate(sentences[i]) if w == word]
    return places, torch.stack(vectors) if vectors else torch.zeros(0, 1)
