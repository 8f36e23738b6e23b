"""Passage encoding as a Lightning predict loop, so a corpus that outgrows one device is sharded
by Lightning's own strategies (DDP over GPUs or nodes) rather than by hand.

Each rank encodes the batches its distributed sampler gives it, keeping every passage's row
number beside its vector; ``VectorWriter`` (Lightning's ``BasePredictionWriter``) writes each
rank's rows and vectors to ``<directory>/rank<r>.npz`` at the end of the epoch, and the vectors
are then put back in corpus order, so the result does not depend on how many ranks ran. The
progress bar is Lightning's. The DataLoader's collate tokenizes (DPR's "title [SEP] text"), so
tokenization runs in the loader's workers.
"""

import contextlib
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import BasePredictionWriter
from torch.utils.data import DataLoader, Dataset

from lit_models.metrics.retrieval import throughput
from retrieval.encoders import BiEncoder


class _Rows(Dataset):
    """(row, title, text) of a corpus with ``title`` and ``text`` columns."""

    def __init__(self, titles: Sequence[str], texts: Sequence[str]) -> None:
        self.titles, self.texts = titles, texts

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, row: int) -> tuple[int, str, str]:
        return row, self.titles[row], self.texts[row]


class PassageEncoding(L.LightningModule):
    """predict_step: (rows, passage vectors) of one batch, with E_P in eval mode."""

    def __init__(self, encoder: BiEncoder) -> None:
        super().__init__()
        self.encoder = encoder

    def predict_step(self, batch: tuple[torch.Tensor, Mapping[str, torch.Tensor]],
                     batch_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        rows, tokens = batch
        return rows, self.encoder.encode_passages(tokens).float()


class VectorWriter(BasePredictionWriter):
    """Writes each rank's (rows, vectors) to ``<directory>/rank<r>.npz`` at the epoch end."""

    def __init__(self, directory: Path) -> None:
        super().__init__(write_interval="epoch")
        self.directory = directory

    def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices) -> None:
        rows = torch.cat([r for r, _ in predictions]).numpy()
        vectors = torch.cat([v for _, v in predictions]).cpu().numpy()
        np.savez(self.directory / f"rank{trainer.global_rank}.npz", rows=rows, vectors=vectors)


def encode_passages(encoder: BiEncoder, titles: Sequence[str], texts: Sequence[str],
                    batch_size: int = 128, trainer: Mapping | None = None,
                    num_workers: int = 0, directory: Path | None = None
                    ) -> tuple[np.ndarray, float]:
    """(float32 [N, H] passage vectors in corpus order, passages encoded per second).

    ``trainer``: Lightning Trainer arguments (accelerator, devices, strategy, precision ...);
    by default one CPU process. ``directory``: where the ranks write their shards (one every
    rank sees, for several processes; default a temporary directory).
    """
    def collate(items):
        rows, batch_titles, batch_texts = zip(*items, strict=True)
        return torch.tensor(rows), encoder.tokenize_passages(batch_titles, batch_texts)

    loader = DataLoader(_Rows(titles, texts), batch_size=batch_size, collate_fn=collate,
                        num_workers=num_workers)
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="plmbench-vectors-")))
        directory.mkdir(parents=True, exist_ok=True)
        settings = {"accelerator": "cpu", "devices": 1, **(trainer or {})}
        runner = L.Trainer(**settings, logger=False, enable_checkpointing=False,
                           callbacks=[VectorWriter(directory)], enable_model_summary=False)
        start = time.perf_counter()
        runner.predict(PassageEncoding(encoder), loader, return_predictions=False)
        runner.strategy.barrier()
        seconds = time.perf_counter() - start
        vectors = np.zeros((len(texts), encoder.dim), dtype=np.float32)
        for shard in sorted(directory.glob("rank*.npz")):
            with np.load(shard) as part:
                vectors[part["rows"]] = part["vectors"]  # DDP's padding repeats rows: same values
    return vectors, throughput(len(texts), seconds)
