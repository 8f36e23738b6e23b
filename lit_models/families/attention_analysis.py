"""What a checkpoint's attention heads look at (``task=analysis/attention``).

Clark et al. 2019, "What Does BERT Look At?" (§3-4) and Voita et al. 2019 (§4), on any
checkpoint (``init_from=ckpt:`` or ``hf:``) of any architecture that returns its attention
probabilities (encoders, GPT-2, the encoder-decoders' encoder stacks): per layer and head, the
attention to the first special token ([CLS], <s>), to separators ([SEP], </s>), to punctuation,
to the previous, the next and the same token, the entropy, the positional and rare-token heads
(``lit_models/families/attention_stats.py``), over pairs of consecutive sentences of a corpus
(``task.text``: a pretraining task's documents); and, where a dependency-parsed set is mirrored
(``task.dependencies``: Universal Dependencies English-EWT), the head that best predicts each
relation in either direction against the best fixed-offset baseline (Clark et al. §4.2, Table 1).

The record's ``analysis`` holds every statistic per layer and head and the dependency table;
``metrics.attention`` their means over heads (the ``attention`` board's columns);
``attention.html`` in the run directory draws a layer x head heatmap of each statistic and the
attention maps of a few sentences in the heads that stand out.
"""

import logging
from collections.abc import Mapping

import lightning as L
import torch

from datamodules import pretrain
from datamodules.attention_text import AttentionTextDataModule, consecutive_pairs
from datamodules.collate import encoder_inputs
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text
from datamodules.init_from import InitFrom
from datamodules.sources import load_split
from lit_models.archs import Model
from lit_models.core.family import TaskFamily, check_max_length
from lit_models.core.module import PlmModule
from lit_models.families.attention_page import attention_page, example_maps
from lit_models.families.attention_stats import STATISTICS, attention_sums, head_predictions
from lit_models.nets.attention import attentions_of, head_probes

log = logging.getLogger("plmbench")
PAGE = "attention.html"
#: Clark et al.'s fixed-offset baselines: the word `offset` positions away is the head (0: itself)
OFFSETS = range(-3, 3)
DIRECTIONS = ("dep->head", "head<-dep")


class LitAttentionAnalysis(PlmModule):
    """Runs the net with its attention probabilities kept; ``predict_step`` gives the sums of
    the statistics of a batch of text, or each head's dependency predictions for parsed
    sentences."""

    def __init__(self, net, kind: str, tokenizer, frequencies: torch.Tensor) -> None:
        super().__init__({}, net.config.num_hidden_layers)
        self.net, self.kind = net, kind
        self.cls_id, self.sep_id = tokenizer.special.cls, tokenizer.special.sep
        special = torch.zeros(tokenizer.vocab_size, dtype=torch.bool)
        special[list(tokenizer.special.ids)] = True
        self.register_buffer("special", special, persistent=False)
        self.register_buffer("punctuation", tokenizer.punctuation_mask(), persistent=False)
        self.register_buffer("frequencies", frequencies, persistent=False)

    def attentions(self, batch: Mapping) -> tuple[torch.Tensor, ...]:
        """Each layer's [B, heads, T, T] attention (an encoder-decoder's encoder's)."""
        if self.kind == "encoder-decoder":
            probes = head_probes(None, True, len(self.net.encoder.layers))
            self.net.encode(batch["input_ids"], batch.get("attention_mask"), probes)
            return attentions_of(probes)
        inputs = encoder_inputs(batch)
        if self.kind == "decoder":  # a decoder's token types are extra token embeddings
            inputs["token_type_ids"] = None
        return self.net(**inputs, output_attentions=True).attentions

    def predict_step(self, batch, batch_idx: int, dataloader_idx: int = 0):
        attentions = self.attentions(batch)
        if dataloader_idx == 0:
            sums = attention_sums(attentions, batch["input_ids"], batch.get("attention_mask"),
                                  self.cls_id, self.sep_id, self.special, self.punctuation,
                                  self.frequencies)
            return {name: value.cpu() for name, value in sums.items()}
        return batch["index"].cpu(), head_predictions(attentions, batch["word_ids"]).cpu()


def dependency_table(trees: list[dict], predictions: list[torch.Tensor], min_count: int
                     ) -> dict:
    """Clark et al.'s Table 1: per relation (those of at least ``min_count`` words, root and
    punct aside), the best head in either direction and the best fixed-offset baseline; "all"
    counts every word, as they do. ``predictions[i]`` [layers, heads, 2, W] is tree i's."""
    layers, heads = predictions[0].shape[:2]
    correct: dict[str, torch.Tensor] = {}
    baseline: dict[str, torch.Tensor] = {}
    counts: dict[str, int] = {}
    for tree, predicted in zip(trees, predictions, strict=True):
        gold = torch.tensor(tree["heads"])  # 1-based, 0 = root
        n = len(gold)
        hits = predicted[..., :n] + 1 == gold  # [layers, heads, 2, n]
        position = torch.arange(n)
        offsets = torch.stack([(position + offset + 1).clamp(0, n) for offset in OFFSETS])
        offset_hits = offsets == gold  # [offsets, n]
        for relation in {"all", *tree["relations"]}:
            where = torch.ones(n, dtype=torch.bool) if relation == "all" else torch.tensor(
                [r == relation for r in tree["relations"]])
            correct.setdefault(relation, torch.zeros(layers, heads, 2))
            correct[relation] += hits[..., where].sum(-1)
            baseline.setdefault(relation, torch.zeros(len(OFFSETS)))
            baseline[relation] += offset_hits[:, where].sum(-1)
            counts[relation] = counts.get(relation, 0) + int(where.sum())
    table = {}
    for relation, n in sorted(counts.items(), key=lambda item: -item[1]):
        if relation != "all" and (relation in ("root", "punct") or n < min_count):
            continue
        accuracy = correct[relation] / n
        best = int(accuracy.argmax())
        layer, head, direction = best // (heads * 2), best // 2 % heads, best % 2
        offset = int(baseline[relation].argmax())
        table[relation] = {
            "count": n, "accuracy": float(accuracy.flatten()[best]), "layer": layer,
            "head": head, "direction": DIRECTIONS[direction],
            "baseline": float(baseline[relation][offset] / n), "offset": OFFSETS[offset]}
    every = correct["all"] / counts["all"]
    return {"relations": table, "accuracy": {d: every[..., i].tolist()
                                             for i, d in enumerate(DIRECTIONS)}}


class AttentionAnalysis(TaskFamily):
    kinds = ("encoder", "decoder", "encoder-decoder")

    def vocabulary_corpus(self, task):
        raise PlmbenchError(f"task {task['name']} analyses a pretrained or fine-tuned model: "
                            "set init_from=ckpt:<run dir> or hf:<dir>")

    def build(self, cfg, model: Model, init_from: InitFrom):
        task, (arch, net, tokenizer) = cfg["task"], model
        check_max_length(task, net)
        documents = pretrain.split_documents(task["text"], task["text"]["splits"]["train"])
        pairs = consecutive_pairs(documents, task["text_examples"])
        if not pairs:
            raise PlmbenchError(f"task {task['name']}: {task['text']['name']} gave no pair of "
                                "consecutive sentences; raise task.text.max_train_samples")
        self.parsed_reason, parsed = None, None
        dependencies = task.get("dependencies")
        if dependencies:
            try:
                parsed = load_split(dependencies["dataset"], dependencies["config"],
                                    dependencies["split"], ("tokens", "head", "deprel"))
            except PlmbenchError as err:
                self.parsed_reason = str(err)
                log.warning("no dependency analysis: %s", err)
            else:
                cap = dependencies.get("max_sentences")
                parsed = parsed.select(range(min(cap, len(parsed)))) if cap else parsed
        dm = AttentionTextDataModule(task, tokenizer, pairs, parsed, cfg["seed"])
        dm.setup()
        module = LitAttentionAnalysis(net, arch.kind, tokenizer,
                                      dm.token_frequencies())
        self.dm, self.tokenizer, self.findings = dm, tokenizer, None
        return module, dm

    def predict(self, trainer: L.Trainer, module, dm, run_dir, cfg) -> dict[str, str]:
        task = cfg["task"]
        dm.trainer = trainer  # each process reads its share of the examples
        outputs = trainer.predict(module, dataloaders=dm.val_dataloader())
        outputs = outputs if len(dm.eval_data) > 1 else [outputs]
        outputs = [module.gather_batches(batches) for batches in outputs]  # in one order
        totals = {key: sum(batch[key] for batch in outputs[0]) for key in outputs[0][0]}
        heads = {name: (totals[name] / totals[f"{name}_n"]).tolist()
                 for name in STATISTICS if name in totals}
        positional = [[layer, head, offset, share]
                      for offset, name in ((-1, "argmax_previous"), (1, "argmax_next"))
                      for layer, row in enumerate(heads[name]) for head, share in enumerate(row)
                      if share >= task["positional_threshold"]]
        rare = [[layer, head, share] for layer, row in enumerate(heads["rarest"])
                for head, share in enumerate(row) if share >= task["rare_threshold"]]
        dependencies = {"skipped": self.parsed_reason} if self.parsed_reason else None
        if len(outputs) > 1 and dm.trees:
            by_index = {int(i): p for indices, batch in outputs[1]
                        for i, p in zip(indices, batch, strict=True)}
            predictions = [by_index[i] for i in range(len(dm.trees))]
            dependencies = {"sentences": len(dm.trees), "too_long": dm.skipped,
                            **dependency_table(dm.trees, predictions,
                                               task["dependencies"]["min_count"])}
        mean = {name: float(torch.tensor(values).mean()) for name, values in heads.items()}
        module.last_metrics = {"attention": {
            **{name: mean[name] for name in ("cls", "sep", "punctuation", "previous", "next",
                                             "self", "entropy") if name in mean},
            "uniform_entropy": float(totals["uniform_entropy"] / totals["uniform_entropy_n"]),
            "positional_heads": float(len(positional)), "rare_token_heads": float(len(rare)),
            **({} if not dependencies or "relations" not in dependencies else {
                "dependency_all": dependencies["relations"]["all"]["accuracy"],
                "dependency_baseline": dependencies["relations"]["all"]["baseline"]})}}
        self.findings = {"examples": len(dm.eval_data[0]), "heads": heads,
                         "positional_heads": positional, "rare_token_heads": rare,
                         "dependencies": dependencies, "page": PAGE}
        maps = example_maps(module.cpu(), dm, self.tokenizer, heads, dependencies,
                            task["page_examples"])
        atomic_write_text(run_dir / PAGE, attention_page(self.findings, maps, cfg))
        return {}

    def analysis(self, module):
        return self.findings

    def export(self, module, model, run_dir, cfg) -> None:
        """Nothing: the checkpoint is where it was."""
