"""A recipe's batch is the global batch: the examples of one optimizer step, summed over the
processes of a distributed run and the batches a step accumulates, as the papers state it
(RoBERTa's GLUE batch of 16 or 32, Liu et al. 2019, Appendix C; BERT's 32, Devlin et al. 2019,
§4.1). ``task.batch_size`` is that number on any hardware: with N processes and
``trainer.accumulate_grad_batches`` A each process loads ``batch_size / (N x A)`` examples per
forward pass, so one optimizer step sees the recipe's batch on one CPU or on eight GPUs. A global
batch the processes and accumulation do not divide is refused in one line.
"""

from dataclasses import dataclass

from datamodules.errors import PlmbenchError


@dataclass(frozen=True)
class Batching:
    """How one optimizer step's ``global_batch`` examples are split: ``world_size`` processes,
    each accumulating ``accumulate_grad_batches`` batches of ``per_process_batch``."""

    global_batch: int
    world_size: int = 1
    accumulate_grad_batches: int = 1

    def __post_init__(self) -> None:
        parts = self.world_size * self.accumulate_grad_batches
        if self.global_batch % parts or self.global_batch < parts:
            fitting = self.global_batch // parts * parts or parts
            raise PlmbenchError(
                f"task.batch_size={self.global_batch} (the global batch of one optimizer step) "
                f"does not divide over {self.world_size} process(es) x "
                f"trainer.accumulate_grad_batches={self.accumulate_grad_batches}: set "
                f"task.batch_size to a multiple of {parts} (such as {fitting}), or change the "
                "devices or the accumulation")

    @property
    def per_process_batch(self) -> int:
        """The examples of one forward pass of one process."""
        return self.global_batch // (self.world_size * self.accumulate_grad_batches)

    def as_record(self) -> dict[str, int]:
        """What the record keeps (``bench/record.py``'s ``Batching``)."""
        return {"world_size": self.world_size, "per_process_batch": self.per_process_batch,
                "accumulate_grad_batches": self.accumulate_grad_batches,
                "global_batch": self.global_batch}
