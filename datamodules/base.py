"""What every task DataModule shares: a training set and one eval set per eval split, batched by
the family's collate function. Subclasses fill ``train_data`` and ``eval_data`` in ``setup``.

The training order is an ``EpochSampler`` (``datamodules/sampling.py``), or with the task's
``group_by_length`` a ``LengthGroupedSampler`` (batches of similar lengths: little padding): the
DataModule's state in a checkpoint is where in which epoch training stood, so a resumed run
continues the same order. Every loader draws its worker seeds from its own generator, never
from torch's global RNG, which belongs to the model (dropout) and is restored from a checkpoint
as it was.

On several processes (DDP) ``task.batch_size`` stays the recipe's global batch
(``datamodules/batching.py``): each process loads its share of every optimizer step's examples,
the one-process order dealt in global batches (``GlobalBatches``), and its share of every eval
split, each example once (``datamodules/eval_sampling.py``).

How the loaders load (worker processes, pinned memory, workers kept between epochs) is the
hardware's business, not the task's: the run sets it from the trainer preset
(``trainer.dataloader``, ``configure_loaders``) for every DataModule alike.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import lightning as L
import pyarrow.compute as pc
import torch
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import DataLoader

from datamodules.batching import Batching
from datamodules.errors import PlmbenchError
from datamodules.eval_sampling import EvaluationSampler
from datamodules.sampling import EpochSampler, GlobalBatches, LengthGroupedSampler


def task_config(task: Mapping | DictConfig, required: Sequence[str]) -> dict:
    """The task config as a plain dict, with the ``required`` keys a DataModule needs."""
    if isinstance(task, DictConfig):
        task = OmegaConf.to_container(task, resolve=True)
    config = dict(task)
    missing = [key for key in required if key not in config]
    if missing:
        raise PlmbenchError(
            f"task {config.get('name')} lacks keys {missing}; add them to the task YAML"
        )
    return config


def check_option(task: Mapping, key: str, value: object, known: Sequence) -> None:
    """A task option that names one of ``known`` ways (a dataset's format, an imbalance method)."""
    if value not in known:
        raise PlmbenchError(f"task {task.get('name')}: {key}={value!r} is not one of "
                            f"{', '.join(map(str, known))}; fix the task YAML")


@dataclass
class LoaderOptions:
    """DataLoader settings that a trainer preset chooses (``trainer.dataloader``)."""

    num_workers: int = 0  # collate (tokenized examples -> padded, masked batches) in N processes
    pin_memory: bool = False  # page-locked batches: asynchronous host -> GPU copies
    persistent_workers: bool = False  # keep the workers between epochs (needs num_workers > 0)


def example_lengths(data: Sequence) -> list[int]:
    """Tokens per example (``input_ids``): from a ``datasets.Dataset``'s Arrow column without
    reading the tokens into Python, or from a list of example dicts (their ``length`` where
    they hold words rather than token ids: the BiLSTM baselines')."""
    if hasattr(data, "with_format"):
        return pc.list_value_length(data.with_format("arrow")["input_ids"]).to_pylist()
    return [example["length"] if "length" in example else len(example["input_ids"])
            for example in data]


class PlmDataModule(L.LightningDataModule):
    def __init__(self, task: Mapping, collate_fn: Callable, seed: int) -> None:
        super().__init__()
        self.task = task
        self.collate_fn = collate_fn
        self.seed = seed
        self.loader_options = LoaderOptions()
        eval_splits = task["splits"].get("eval") or []
        self.eval_split_names = [eval_splits] if isinstance(eval_splits, str) else list(eval_splits)
        self.train_data: Sequence | None = None  # a datasets.Dataset or a list of examples
        self.eval_data: list[Sequence] = []  # one per eval split, in eval_split_names' order
        #: unlabelled splits a trained model predicts, whole (``task.predict_splits``: GLUE's
        #: test sets, for ``plmbench submit glue``); ``predict_data`` in their order
        predict = task.get("predict_splits") or []
        self.predict_split_names = [predict] if isinstance(predict, str) else list(predict)
        self.predict_data: list[Sequence] = []
        self._resume: dict | None = None  # where a checkpoint's training stood (load_state_dict)

    def _loaded_train_data(self) -> Sequence:
        if self.train_data is None:
            raise PlmbenchError(
                f"task {self.task['name']} has no train split loaded; call setup() first and "
                "give the task a splits.train entry"
            )
        return self.train_data

    @property
    def num_train_examples(self) -> int:
        return len(self._loaded_train_data())

    @property
    def fingerprints(self) -> dict[str, str]:
        """What identifies each split's data (``datasets`` fingerprints), for the run record."""
        return {}

    def configure_loaders(self, **options) -> None:
        """Set the ``LoaderOptions`` of every loader (the trainer preset's ``dataloader``)."""
        try:
            self.loader_options = LoaderOptions(**options)
        except TypeError:
            raise PlmbenchError(
                f"trainer.dataloader {sorted(options)}: use num_workers, pin_memory and "
                "persistent_workers"
            ) from None

    def _loader(self, data: Sequence, batch_size: int, **kwargs) -> DataLoader:
        options = self.loader_options
        return DataLoader(
            data,
            batch_size=batch_size,
            collate_fn=self.collate_fn,
            num_workers=options.num_workers,
            pin_memory=options.pin_memory,
            persistent_workers=options.persistent_workers and options.num_workers > 0,
            generator=torch.Generator().manual_seed(self.seed),
            **kwargs,
        )

    def train_dataloader(self) -> DataLoader:
        """Shuffled per (seed, epoch), resumed where a loaded checkpoint stood."""
        data = self._loaded_train_data()
        if len(data) == 0:
            raise PlmbenchError(
                f"task {self.task['name']} has no training examples left (split "
                f"{self.task['splits']['train']}, max_train_samples="
                f"{self.task.get('max_train_samples')}); raise task.max_train_samples"
            )
        return self._loader(data, self.train_batch_size, sampler=self.shared(self._sampler(data)))

    def shared(self, sampler: EpochSampler) -> EpochSampler | GlobalBatches:
        """``sampler``'s one-process training order as this process's share of it (on several
        processes: ``GlobalBatches``, each optimizer step's examples those of one process's step),
        resumed where a loaded checkpoint stood."""
        processes, rank = self.ranks()
        if processes > 1:
            batching = self.batching
            sampler = GlobalBatches(
                sampler, batching.per_process_batch * batching.accumulate_grad_batches,
                processes, rank)
        if self._resume is not None:
            seen = self._resume["batches"] * self.train_batch_size
            sampler.resume_at(self._resume["epoch"], seen)
        return sampler

    def _sampler(self, data: Sequence) -> EpochSampler:
        """One process's training order: shuffled, or grouped by length in global batches with
        the task's ``group_by_length``."""
        if not self.task.get("group_by_length"):
            return EpochSampler(len(data), self.seed)
        # grouped in global batches, one process's order: ``shared`` deals them to the ranks
        return LengthGroupedSampler(example_lengths(data), self.task["batch_size"], self.seed)

    @property
    def batching(self) -> Batching:
        """How the task's global batch (``task.batch_size``, the recipe's) is split over the
        processes and the accumulated batches of the attached trainer (``datamodules/batching.py``);
        one line where it does not divide."""
        trainer = self.trainer
        accumulation = trainer.accumulate_grad_batches if trainer is not None else 1
        return Batching(self.task["batch_size"], self.ranks()[0], accumulation)

    @property
    def train_batch_size(self) -> int:
        """The training examples of one forward pass of this process."""
        return self.batching.per_process_batch

    def ranks(self) -> tuple[int, int]:
        """(processes, this process's rank) of the trainer this DataModule is attached to; (1, 0)
        without one."""
        trainer = self.trainer
        return (trainer.world_size, trainer.global_rank) if trainer is not None else (1, 0)

    def eval_sampler(self, data: Sequence, split: str) -> EvaluationSampler:
        """This process's share of one eval split's examples (``EvaluationSampler``)."""
        processes, rank = self.ranks()
        return EvaluationSampler(len(data), self.eval_batch_size, processes, rank,
                                 f"task {self.task['name']}: eval split {split}")

    @property
    def eval_batch_size(self) -> int:
        """Examples per evaluation batch: ``task.eval_batch_size``, else the global batch."""
        return self.task.get("eval_batch_size") or self.task["batch_size"]

    def eval_loader(self, data: Sequence, split: str) -> DataLoader:
        """The loader of one eval split: this process's share of its examples, every example
        once over all processes, in the batches one process would cut (``EvaluationSampler``)."""
        return self._loader(data, self.eval_batch_size, sampler=self.eval_sampler(data, split))

    def eval_indices(self, split_index: int) -> list[int]:
        """The indices into eval split ``split_index`` of the examples this process evaluates,
        in the order its loader gives them: what a family that collects its outputs batch by
        batch pairs them with (one process: 0, 1, 2 ...; several: this process's share)."""
        data, split = self.eval_data[split_index], self.eval_split_names[split_index]
        return list(self.eval_sampler(data, split))

    def state_dict(self) -> dict:
        """Saved in every checkpoint: the epoch and the batches of it trained so far."""
        loop = self.trainer.fit_loop if self.trainer is not None else None
        if loop is None:
            return {}
        return {"epoch": loop.epoch_progress.current.processed,
                "batches": loop.epoch_loop.batch_progress.current.processed}

    def load_state_dict(self, state: dict) -> None:
        self._resume = state or None

    def val_dataloader(self) -> list[DataLoader]:
        """One loader per eval split, in the task's order (see ``eval_split_names``); an empty
        split is refused: no metric is defined on no examples (scikit-learn, scipy and the
        official scripts refuse them too)."""
        for split, data in zip(self.eval_split_names, self.eval_data, strict=True):
            if len(data) == 0:
                raise PlmbenchError(
                    f"task {self.task['name']}: eval split {split} has no examples "
                    f"(max_eval_samples={self.task.get('max_eval_samples')}); raise "
                    "task.max_eval_samples or name another split"
                )
        return [self.eval_loader(data, split)
                for split, data in zip(self.eval_split_names, self.eval_data, strict=True)]

    def predicted_splits(self) -> list[tuple[str, Sequence, DataLoader]]:
        """(split, its examples, their loader) of what a run predicts without scoring: the
        ``predict_splits`` (whole), or, for a task without a training split, its eval splits."""
        if self.task["splits"].get("train"):
            names, data = self.predict_split_names, self.predict_data
        else:
            names, data = self.eval_split_names, self.eval_data
        return [(name, examples, self._loader(examples, self.eval_batch_size,
                                              sampler=self.eval_sampler(examples, name)))
                for name, examples in zip(names, data, strict=True)]
