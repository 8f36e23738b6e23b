"""Sentences for ELMo's bidirectional language model (Peters et al. 2018, §3.1).

A corpus task's documents (``datamodules/pretrain.py``: capped, split into sentences, the last
``eval_documents`` held out as the eval split "heldout") give one example per sentence: its words
(``datamodules/words.py``, as written: ELMo is cased) between <S> and </S>, at most
``max_length`` of them with the markers, as the softmax's word ids (<unk> outside the vocabulary)
and as the words themselves, which the collate spells as character ids
(``datamodules/characters.py``): a batch holds ``input_ids`` [B, T] (targets), ``char_ids``
[B, T, 50] (inputs) and, when its sentences differ in length, ``attention_mask``.

Training batches are grouped by length (``LengthGroupedSampler``, as the fine-tuning tasks'
``group_by_length``; ``task.group_by_length=false`` turns it off): a batch of shuffled sentences
pads every row to its longest, and a corpus's sentence lengths vary enough that most of such a
batch is padding (glue_baselines_cpu's biLM run, 2,000 Wikipedia articles at 64 words, batches
of 64: 62.5% of the slots shuffled, 2.7% grouped).

The released biLM was trained on 20-word windows of a running text with its LSTM state carried
from one batch to the next; examples here are whole sentences and every sentence starts from a
zero state, as the biLM is used downstream (one sentence at a time).
"""

import hashlib
import json
from collections.abc import Mapping
from functools import partial

import numpy as np
import torch
from omegaconf import DictConfig

from datamodules import pretrain
from datamodules.base import PlmDataModule, task_config
from datamodules.characters import char_ids
from datamodules.collate import pad_collate
from datamodules.errors import PlmbenchError
from datamodules.words import BOS, EOS, WordVocabulary


def _task(task: Mapping | DictConfig) -> dict:
    return task_config(task, pretrain.REQUIRED_KEYS)


def split_sentences(task: Mapping | DictConfig) -> tuple[str, dict[str, list[str]]]:
    """(what identifies the text, split -> its sentences): the training split without its
    held-out documents, and every eval split ("heldout": those documents)."""
    task = _task(task)
    source = task["splits"]["train"]
    if source is None:
        raise PlmbenchError(f"task {task['name']}: the biLM trains on a training split; give "
                            "the task splits.train")
    documents = pretrain.split_documents(task, source)
    held = task.get("eval_documents") or 0
    if len(documents) <= held:
        raise PlmbenchError(f"task {task['name']}: {len(documents)} documents leave none to "
                            f"train on after holding out eval_documents={held}; raise "
                            "task.max_train_samples or lower task.eval_documents")
    splits = {"train": documents[: len(documents) - held]}
    for split in task["splits"].get("eval") or []:
        splits[split] = (documents[len(documents) - held:] if split == pretrain.HELD_OUT
                         else pretrain.split_documents(task, split))
    key, _ = pretrain.vocabulary_corpus(task)
    sentences = {split: [s for document in docs for s in document]
                 for split, docs in splits.items()}
    return json.dumps([key, held]), sentences


def collate_sentences(examples: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Word ids padded (``pad_collate``), and the words spelled: ``char_ids`` [B, T, 50] with
    all-zero rows at padding."""
    batch = pad_collate([{"input_ids": e["input_ids"]} for e in examples], pad_id)
    spelled = np.zeros((*batch["input_ids"].shape, char_ids([]).shape[1]), dtype=np.int64)
    for row, example in enumerate(examples):
        words = example["words"].split(" ")
        spelled[row, : len(words)] = char_ids(words)
    batch["char_ids"] = torch.from_numpy(spelled)
    return batch


class BiLMDataModule(PlmDataModule):
    """``sentences``: what ``split_sentences`` gave for the task, if it was read already."""

    def __init__(self, task: Mapping | DictConfig, vocab: WordVocabulary, seed: int = 0,
                 sentences: tuple[str, dict[str, list[str]]] | None = None) -> None:
        task = _task(task)
        task.setdefault("group_by_length", True)
        super().__init__(task, partial(collate_sentences, pad_id=vocab.pad), seed)
        self.vocab = vocab
        self.key = ""
        self.sentences = sentences

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:
            return
        self.key, sentences = self.sentences or split_sentences(self.task)
        self.sentences = None  # the examples hold them now
        self.train_data = self.examples(sentences["train"])
        self.eval_data = [self.examples(sentences[split]) for split in self.eval_split_names]

    def examples(self, sentences: list[str]) -> list[dict]:
        """One example per sentence: "<S> words </S>" (at most ``max_length`` words, the markers
        included) as ids and as the words joined by spaces (no word holds one)."""
        cut = self.task["max_length"] - 2
        if cut < 1:
            raise PlmbenchError(f"task {self.task['name']}: max_length must leave room for a word "
                                "between <S> and </S>; raise task.max_length")
        examples = []
        for words in self.vocab.words_of(sentences):
            if words:
                words = [BOS, *words[:cut], EOS]
                examples.append({"input_ids": self.vocab.ids(words), "words": " ".join(words)})
        return examples

    @property
    def fingerprints(self) -> dict[str, str]:
        if not self.key:
            return {}
        corpus = hashlib.sha256(self.key.encode()).hexdigest()[:16]
        return {"corpus": corpus, "vocabulary": self.vocab.fingerprint}
