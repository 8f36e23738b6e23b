"""What the probes read (``lit_models/families/probing.py``): sentences as words, each with the
targets a probe predicts from the frozen encoder's states.

- ``token``: one label per word (Liu et al. 2019; Tenney et al. 2019's POS, entities): a tagged
  dataset's words and labels (``tokens_field``, ``labels_field``; ids named by ``label_names``,
  or strings);
- ``edge``: one label per (word, its syntactic head) pair, the dependency relation (Tenney et al.
  2019, "What do you learn from context?", §2: edge probing over two spans, here two words); the
  root has no edge;
- ``sentence``: one label per sentence (Conneau et al. 2018's tasks, ``datamodules/
  sentence_probes.py``), generated from a corpus's sentences, train and eval from disjoint
  documents.

A word is read at its first sub-token (Devlin et al. 2019, §5.3); words past ``max_length``
tokens have no state, so their targets are dropped. A word's type (its lowercased form) is what
Hewitt & Liang's control task labels.
"""

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from datamodules import pretrain, sentence_probes
from datamodules.base import PlmDataModule
from datamodules.collate import pad_collate
from datamodules.errors import PlmbenchError
from datamodules.sources import load_split
from datamodules.tagging import PAD_VALUES, encode_words
from datamodules.tokenization import TextTokenizer

KINDS = ("token", "edge", "sentence")


@dataclass
class Item:
    """One sentence: its words and targets, (word, label) for ``token``, (word, head, label) for
    ``edge``, the label alone for ``sentence``."""

    words: list[str]
    targets: list = field(default_factory=list)


def _rows(task: Mapping, split: str, cap_key: str, columns: Sequence[str]):
    raw = load_split(task["dataset"], task["config"], split, columns, task.get("hub_id"))
    cap = task.get(cap_key)
    return raw if cap is None else raw.select(range(min(cap, len(raw))))


def labelled_items(task: Mapping, split: str, cap_key: str) -> list[Item]:
    """The token or edge items of a tagged or parsed dataset split, labels as strings."""
    if task["kind"] == "token":
        rows = _rows(task, split, cap_key, (task["tokens_field"], task["labels_field"]))
        names = task.get("label_names")
        return [Item(list(words), [(i, names[label] if names else str(label))
                                   for i, label in enumerate(labels)])
                for words, labels in zip(rows[task["tokens_field"]], rows[task["labels_field"]],
                                         strict=True)]
    rows = _rows(task, split, cap_key, (task["tokens_field"], task["heads_field"],
                                        task["labels_field"]))
    items = []
    for words, heads, relations in zip(rows[task["tokens_field"]], rows[task["heads_field"]],
                                       rows[task["labels_field"]], strict=True):
        edges = [(i, head - 1, relation.split(":")[0] if task["coarse"] else relation)
                 for i, (head, relation) in enumerate(zip(heads, relations, strict=True))
                 if head > 0]
        items.append(Item(list(words), edges))
    return items


def sentence_items(task: Mapping) -> tuple[dict[str, list[Item]], list[str]]:
    """Conneau et al.'s task ``task.generator`` over the sentences of ``task.text``'s documents,
    the first ``train_share`` of the documents for training, the rest for evaluation."""
    documents = pretrain.split_documents(task["text"], task["text"]["splits"]["train"])
    cut = int(len(documents) * task["train_share"])
    sentences = {split: [sentence_probes.words_of(s) for d in part for s in d]
                 for split, part in (("train", documents[:cut]), ("eval", documents[cut:]))}
    generator, counts = task["generator"], {"train": task["train_examples"],
                                            "eval": task["eval_examples"]}
    built, names = {}, []
    for split, seed in (("train", task["seed"]), ("eval", task["seed"] + 1)):
        if generator == "sentence_length":
            examples, names = sentence_probes.sentence_length(
                sentences[split], counts[split] // len(sentence_probes.LENGTH_BINS), seed)
        elif generator == "word_content":
            examples, names = sentence_probes.word_content(
                sentences[split], max(1, counts[split] // task["words"]), task["words"],
                task["first_rank"], sentences["train"], seed)
        elif generator == "bigram_shift":
            examples, names = sentence_probes.bigram_shift(sentences[split], counts[split], seed)
        else:
            raise PlmbenchError(f"task {task['name']}: generator {generator!r}; use "
                                "sentence_length, word_content or bigram_shift")
        built[split] = [Item(words, [names[label]]) for words, label in examples]
    if not built["train"] or not built["eval"]:
        raise PlmbenchError(f"task {task['name']}: {generator} found no example in "
                            f"{task['text']['name']}'s sentences; read more documents "
                            "(task.text.max_train_samples)")
    return built, names


class ProbingDataModule(PlmDataModule):
    """The items of a training and an eval split, encoded: each example's ``input_ids``,
    ``token_type_ids``, ``word_ids`` (the word each first sub-token starts, -1 elsewhere) and
    ``index`` into the split's ``items``."""

    def __init__(self, task: Mapping, tokenizer: TextTokenizer, items: dict[str, list[Item]],
                 seed: int = 0) -> None:
        super().__init__({**task, "splits": {"train": "train", "eval": ["eval"]}},
                         partial(pad_collate, pad_id=tokenizer.special.pad,
                                 pad_values=PAD_VALUES), seed)
        self.tokenizer, self.items = tokenizer, items
        self.encoded: dict[str, list[dict]] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.encoded:
            return
        encoder = self.tokenizer.words_encoder(self.task["max_length"], "task.max_length")
        for split, items in self.items.items():
            rows = encode_words(encoder, [item.words for item in items])
            self.encoded[split] = [{**row, "index": i} for i, row in enumerate(rows)]
        self.train_data, self.eval_data = self.encoded["train"], [self.encoded["eval"]]

    def loaders(self) -> dict:
        """Both splits in order (no shuffling): the features are read, not trained on; each
        process reads its share (``eval_sampler``: with this DataModule's trainer set)."""
        return {split: self._loader(data, self.eval_batch_size,
                                    sampler=self.eval_sampler(data, split))
                for split, data in self.encoded.items()}

    @property
    def fingerprints(self) -> dict[str, str]:
        return {split: hashlib.sha256(json.dumps([r["input_ids"] for r in rows]).encode())
                .hexdigest()[:16] for split, rows in self.encoded.items()}
