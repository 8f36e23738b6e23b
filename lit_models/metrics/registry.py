"""The metric registry: every metric plmbench reports, by the name a task YAML lists under
``metrics`` and a record stores its value under.

A registration is one function and one decorator, in the module of its field
(``classification.py``, ``squad.py``, ``rouge.py`` ...):

- streaming (updated batch by batch, reduced over DDP processes by torchmetrics)::

      @register_metric("accuracy", inputs="labels")
      def accuracy(num_labels: int, **_) -> torchmetrics.Metric: ...

- whole-split (computed once at the end of an evaluation, from every prediction of the split)::

      @register_metric("bleu", inputs="texts", whole_split=True)
      def bleu(predictions: list[str], references: list[str], **_) -> float: ...

``inputs`` says what the metric scores (``INPUTS``: class ids, regression scores, texts, answers,
tags, rankings); a task family feeds the kinds it produces and ``build_metrics`` gives it the
metrics its task names. One registration may record several values computed together (SQuAD's
exact match and F1, seqeval's precision/recall/F1, ROUGE-1/2/L/Lsum): it lists all their names,
a task names any of them to select it, and every value it computes is recorded. A function gets
the family's context as keywords (``num_labels``, ``match`` ...) and ignores the rest (``**_``).

A metric whose value depends on settings a reader must know to recompute it (sacreBLEU's
tokenizer, smoothing and version) is a ``Signed`` metric: ``Metrics.signatures()`` gives its
signature, which the run records beside the value.

Predictions of tensor kinds (``labels``, ``scores``) are reduced over DDP processes by
torchmetrics (a whole-split metric's are gathered with ``cat``); predictions of the other kinds are
Python objects, which the family gathers (``PlmModule.gather_indexed``) before it updates: those
metrics never sync.
"""

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from datamodules.errors import PlmbenchError

log = logging.getLogger("plmbench")

#: what a metric scores, against what: kind -> (prediction, reference), one per example
INPUTS = {
    "labels": ("predicted class id (tensor)", "gold class id"),
    "probabilities": ("class probabilities (tensor: p(positive) for two classes)",
                      "gold class id"),
    "scores": ("predicted score (tensor, regression)", "gold score"),
    "indexed_labels": ("(example index, predicted class id) (tensor [N, 2])", "gold class id"),
    "texts": ("generated text", "reference text"),
    "answers": ("answer text", "the reference answers"),
    "answers_with_null_odds": ("(best non-null answer, null odds) (SQuAD v2.0)",
                               "the reference answers (none: unanswerable)"),
    "tags": ("predicted tag sequence", "gold tag sequence"),
    "rankings": ("retrieved passage texts, best first", "the reference answers"),
    "answer_options": ("predicted label (0/1) of an answer option (MultiRC)",
                       "(gold label, the question it answers)"),
    "entities": ("the entity chosen as a query's answer (ReCoRD)", "the gold answers"),
}
#: the kinds whose predictions are tensors that torchmetrics reduces over processes
TENSOR_INPUTS = ("labels", "probabilities", "scores", "indexed_labels")


@dataclass(frozen=True)
class Registration:
    """One registered metric: the values it records, what it scores, and how it is made."""

    names: tuple[str, ...]
    inputs: str
    #: (**context) -> torchmetrics Metric: ``update(predictions, references)``, ``compute()`` ->
    #: a value (one name) or {name: value}
    make: Callable[..., Metric]


#: (inputs, name) -> its registration
METRICS: dict[tuple[str, str], Registration] = {}


class Signed(Metric):
    """A metric that says how it computed its values (a signature per value name)."""

    def signatures(self) -> dict[str, str]:
        raise NotImplementedError


class WholeSplit(Metric):
    """A metric computed once from every (prediction, reference) of a split by ``function``."""

    full_state_update = False

    def __init__(self, function: Callable, tensors: bool, context: Mapping) -> None:
        super().__init__(sync_on_compute=tensors)
        self.function, self.context = function, dict(context)
        self.add_state("predictions", default=[], dist_reduce_fx="cat" if tensors else None)
        self.add_state("references", default=[], dist_reduce_fx="cat" if tensors else None)
        self.tensors = tensors

    def update(self, predictions, references) -> None:
        if self.tensors:
            self.predictions.append(predictions)
            self.references.append(references)
        else:
            self.predictions.extend(predictions)
            self.references.extend(references)

    def __hash__(self) -> int:
        """By identity, as a module's (torchmetrics hashes the states, and this one's may hold the
        examples' lists: Lightning's teardown, walking the modules after an error, would fail on
        them and hide the error)."""
        return id(self)

    def _apply(self, fn, *args, **kwargs):
        """Move and cast the tensor states only: states of Python objects (texts, answers) stay
        as they are (torchmetrics would call ``fn`` on each, as Lightning's teardown does with
        ``.cpu()`` after an error)."""
        if self.tensors:
            return super()._apply(fn, *args, **kwargs)
        held = self.predictions, self.references
        self.predictions, self.references = [], []
        try:
            return super()._apply(fn, *args, **kwargs)
        finally:
            self.predictions, self.references = held

    def compute(self):
        if self.tensors:
            return self.function(dim_zero_cat(self.predictions), dim_zero_cat(self.references),
                                 **self.context)
        return self.function(list(self.predictions), list(self.references), **self.context)


def register_metric(*names: str, inputs: str, whole_split: bool = False):
    """Register the decorated function as the metric(s) ``names`` over ``inputs`` (module
    docstring); a name is registered once per kind of inputs."""
    if inputs not in INPUTS:
        raise ValueError(f"inputs={inputs!r} is not one of {list(INPUTS)}")

    def register(function: Callable) -> Callable:
        if whole_split:
            def make(**context) -> Metric:
                return WholeSplit(function, inputs in TENSOR_INPUTS, context)
        else:
            make = function
        registration = Registration(tuple(names), inputs, make)
        for name in names:
            if (inputs, name) in METRICS:
                raise ValueError(f"metric {name!r} over {inputs} is registered twice")
            METRICS[inputs, name] = registration
        return function

    return register


class Metrics(nn.Module):
    """The metrics a task names, over the inputs its family feeds: ``update(references,
    **predictions)`` takes one batch's references and its predictions by kind (the family passes
    every kind it produces), ``compute()`` every value of the selected registrations (floats),
    ``reset()`` starts over."""

    def __init__(self, parts: Sequence[tuple[Registration, Metric]]) -> None:
        super().__init__()
        self.registrations = [registration for registration, _ in parts]
        self.parts = nn.ModuleList(metric for _, metric in parts)

    def __len__(self) -> int:
        return len(self.parts)

    def update(self, references, **predictions) -> None:
        for registration, metric in zip(self.registrations, self.parts, strict=True):
            metric.update(predictions[registration.inputs], references)

    def compute(self) -> dict[str, float]:
        values: dict[str, float] = {}
        for registration, metric in zip(self.registrations, self.parts, strict=True):
            out = metric.compute()
            if not isinstance(out, Mapping):
                out = {registration.names[0]: out}
            values |= {name: float(value) for name, value in out.items()}
        return values

    def signatures(self) -> dict[str, str]:
        """How each ``Signed`` metric computed its values (after ``compute``)."""
        return {name: signature for metric in self.parts if isinstance(metric, Signed)
                for name, signature in metric.signatures().items()}

    def reset(self) -> None:
        for metric in self.parts:
            metric.reset()


def local(metric: nn.Module) -> nn.Module:
    """``metric`` (and the metrics it holds) computed from this process's state alone: each
    process updates it with every process's gathered examples."""
    for module in metric.modules():
        if isinstance(module, Metric):
            module.sync_on_compute = module._to_sync = False
    return metric


def exact_total(metric: Metric) -> Metric:
    """``metric`` (a torchmetrics sum or mean of float32 values: losses, counts) keeping its state
    in float64, whose 53-bit mantissa holds the float32 terms' sum exactly while they span fewer
    than 29 binary orders of magnitude: the total does not depend on the order in which batches
    and processes add up, and any number of DDP processes records one process's value."""
    return metric.set_dtype(torch.float64)


def names_over(inputs: str) -> list[str]:
    """Every metric name registered over ``inputs``."""
    return [name for kind, name in METRICS if kind == inputs]


def build_metrics(names: Sequence[str], feeds: Sequence[str], without: Sequence[str] = (),
                  **context) -> Metrics:
    """The metrics ``names`` (a task's ``metrics``) over the kinds of inputs a family ``feeds``
    (the first kind that has a name wins), made with ``context`` (``num_labels``, ``match`` ...).
    A name registered only over kinds in ``without`` (what the family knowingly lacks: a
    closed-book reader retrieves nothing) is left out; any other name the family cannot feed is
    refused in one line naming the ones it can."""
    feeds = (feeds,) if isinstance(feeds, str) else tuple(feeds)
    chosen: list[Registration] = []
    for name in names:
        registration = next((METRICS[k, name] for k in feeds if (k, name) in METRICS), None)
        if registration is None:
            elsewhere = sorted({k for k, n in METRICS if n == name})
            if elsewhere and set(elsewhere) <= set(without):
                log.info("metric %s is not computed: it scores %s, which this family has none of",
                         name, " and ".join(elsewhere))
                continue
            usable = [n for k in feeds for n in names_over(k)]
            scores = (f"scores {' and '.join(elsewhere)}, and this task's family feeds "
                      f"{' and '.join(feeds)}" if elsewhere else "is unknown")
            raise PlmbenchError(f"metric {name!r} in the task config {scores}: use one of "
                                f"{usable}")
        if registration not in chosen:
            chosen.append(registration)
    parts = []
    for registration in chosen:
        metric = registration.make(**context)
        if registration.inputs not in TENSOR_INPUTS:  # the family gathers these predictions
            metric = local(metric)
        parts.append((registration, metric))
    return Metrics(parts)
