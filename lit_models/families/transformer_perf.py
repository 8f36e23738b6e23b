"""``plmbench perf``'s workloads of every Transformer architecture (registered in
``lit_models/measure/perf_registry.py``): each step of an architecture as our nets run it and as its
``transformers`` counterpart runs it, with the same config, weights and batch, in one process.

The registration names everything (``Arch``: its nets, kind and ``hf.classes``), so every
registered architecture is measured the same way:

- ``pretrain``: encoders with a masked-LM class, the masked-LM step (15% of tokens masked as BERT
  masks them): ours computes vocabulary logits at the masked positions only (Design contract 2),
  transformers' ``*ForMaskedLM`` (``classes["mlm"]``) at every position. Encoder-decoders, the
  teacher-forced reconstruction step of denoising / span corruption; decoders, the next-token
  step of causal LM (``classes["pretraining"]``). Full-length rows, no padding. (XLNet's
  permutation LM has no counterpart here yet.)
- ``finetune``: sequence classification (``classes["classifier"]``, two labels) as a run's
  ``LitClassifier`` computes it, on a dynamically padded batch (one row of the full length, the
  others of random lengths down to a quarter of it), for architectures with a classification
  head.
- ``inference``: the backbone's forward (``classes["encoder"]``) on the fine-tuning batch (an
  encoder-decoder's on its pretraining batch), without gradients.

The fine-tuning and inference steps of the padded batch are also timed kept padded ("plmbench
padded": ``attention.kept_padded``), so the report shows what running them unpadded gains.

Models that are no Transformer register their own workloads (``BASELINE_WORKLOADS``), beside
their families: ELMo's biLM (``bilm_perf.py``), the GLUE baselines' BiLSTM (``bilstm_perf.py``).

Training steps are forward, backward and a fused AdamW update (as ``configure_optimizer``); each
implementation's ``run()`` returns the loss (training) or last hidden state (inference) that
``tests/bench/perf/test_perf.py`` compares across implementations.
"""

import re
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.collate import (
    IGNORE_INDEX,
    add_label_positions,
    at_positions,
    encoder_inputs,
    label_positions,
)
from lit_models.archs import Arch
from lit_models.families.classify import LitClassifier
from lit_models.interop.hf import hf_checkpoint
from lit_models.measure.perf_registry import (
    ATTENTION,
    Implementation,
    Workload,
    on_device,
    register_workload,
    special_ids,
)
from lit_models.nets.attention import kept_padded
from lit_models.objectives.mlm import MaskingConfig, mask_tokens, masked_lm_loss


def _ids(arch: Arch, config, batch: int, length: int, generator: torch.Generator) -> Tensor:
    """Random non-special tokens between the architecture's cls/bos and sep/eos (where its
    vocabulary has them)."""
    roles = special_ids(arch)
    ids = torch.randint(len(roles), config.vocab_size, (batch, length), generator=generator)
    first, last = roles.get("cls", roles.get("bos")), roles.get("sep", roles.get("eos"))
    if first is not None:
        ids[:, 0] = first
    if last is not None:
        ids[:, -1] = last
    return ids


def mlm_batch(arch: Arch, config, batch: int, length: int) -> dict[str, Tensor]:
    """Full-length rows masked as MLM pretraining masks them (as MLMCollator gives them)."""
    generator = torch.Generator().manual_seed(0)
    ids = _ids(arch, config, batch, length, generator)
    special = torch.zeros(config.vocab_size, dtype=torch.bool)
    special[: len(special_ids(arch))] = True
    corrupted, labels = mask_tokens(ids, special, MaskingConfig(), config.vocab_size,
                                    special_ids(arch)["mask"], generator)
    return add_label_positions({"input_ids": corrupted, "labels": labels})


def padded_batch(arch: Arch, config, batch: int, length: int) -> dict[str, Tensor]:
    """A classification batch padded to its longest row (``length``), two labels; token types
    for architectures that read them (as a run's ``LitClassifier`` passes them)."""
    generator = torch.Generator().manual_seed(1)
    ids = _ids(arch, config, batch, length, generator)
    lengths = torch.randint(max(3, length // 4), length + 1, (batch,), generator=generator)
    lengths[0] = length
    mask = torch.arange(length)[None] < lengths[:, None]
    if "sep" in special_ids(arch):
        ids[torch.arange(batch), lengths - 1] = special_ids(arch)["sep"]
    out = {"input_ids": ids.masked_fill(~mask, config.pad_token_id), "attention_mask": mask.long(),
           "labels": torch.randint(2, (batch,), generator=generator)}
    if arch.capabilities.token_types:
        out["token_type_ids"] = torch.zeros_like(ids)
    return out


def causal_batch(arch: Arch, config, batch: int, length: int) -> dict[str, Tensor]:
    """Full-length rows whose label at position i is token i + 1 (as CausalLMCollator)."""
    ids = _ids(arch, config, batch, length, torch.Generator().manual_seed(3))
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[:, :-1] = ids[:, 1:]
    return add_label_positions({"input_ids": ids, "labels": labels})


def seq2seq_batch(arch: Arch, config, batch: int, length: int) -> dict[str, Tensor]:
    """Source and target rows of ``length`` (no padding), decoder inputs the targets shifted
    right after the decoder start token."""
    generator = torch.Generator().manual_seed(2)
    labels = _ids(arch, config, batch, length, generator)
    decoder_input_ids = torch.cat([torch.full((batch, 1), config.decoder_start_token_id),
                                   labels[:, :-1]], 1)
    return add_label_positions({"input_ids": _ids(arch, config, batch, length, generator),
                                "decoder_input_ids": decoder_input_ids, "labels": labels})


def reference(arch: Arch, net: nn.Module, kind: str, attention: str,
              head: nn.Module | None = None) -> nn.Module:
    """transformers' ``classes[kind]`` with ``attention``, holding ``net``'s (and ``head``'s)
    weights; ValueError where the class has no such attention implementation."""
    import transformers

    config, weights = hf_checkpoint(arch, net, head)
    model_type = config.pop("model_type")
    config.pop("architectures")
    hf_config = transformers.AutoConfig.for_model(model_type, **config,
                                                  attn_implementation=attention)
    model = getattr(transformers, arch.hf.classes[kind])(hf_config)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # tied copies are no weights of their own; the masked-LM class has no pooler nor other
    # pretraining heads, and may lack what the layout calls optional (DeBERTa's absolute
    # positions, which only our enhanced mask decoder reads); any other weight left out would
    # void the comparison
    skipped, layout = re.compile(arch.hf.skipped), arch.hf
    tensors = model.state_dict(keep_vars=True)
    loaded = {tensors[k].data_ptr() for k in weights if k in tensors}
    missing = [k for k in missing if not skipped.search(k.removeprefix(layout.prefix))
               and tensors[k].data_ptr() not in loaded]  # a tie to a loaded weight is loaded
    unexpected = [k for k in unexpected
                  if not k.removeprefix(layout.prefix).startswith(layout.optional())]
    if missing or unexpected:
        raise RuntimeError(f"weights not carried over to {arch.hf.classes[kind]}: missing "
                           f"{missing}, unexpected {unexpected}")
    return model.to(next(net.parameters()).device)


def _inputs(batch: dict[str, Tensor], keys: tuple[str, ...]) -> dict:
    """The ``keys`` a batch holds: token types only where the architecture reads them."""
    return {k: batch[k] for k in keys if k in batch}


def _flat_cross_entropy(logits: Tensor, labels: Tensor) -> Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=IGNORE_INDEX)


def _with_references(workload: Workload, build: Callable[[str], Implementation]) -> Workload:
    for attention in ATTENTION:
        try:
            workload.implementations[f"transformers {attention}"] = build(attention)
        except ValueError as err:
            workload.unavailable[f"transformers {attention}"] = str(err).split(".")[0]
    return workload


@register_workload("pretrain")
def pretrain(arch: Arch, config, batch_size: int, length: int,
             device: torch.device) -> Workload | None:
    """None where no step of ours has a transformers counterpart (XLNet)."""
    if arch.kind in ("encoder-decoder", "decoder"):
        return _generative_pretrain(arch, config, batch_size, length, device)
    if "mlm" not in arch.hf.classes:
        return None
    ours = (arch.masked_lm or arch.pretraining)(config).to(device)
    batch = on_device(device, mlm_batch(arch, config, batch_size, length))
    workload = Workload("pretrain", True, batch, batch_size * length, f"{batch_size} x {length}")
    workload.implementations["plmbench"] = Implementation(ours, lambda: masked_lm_loss(
        ours(**encoder_inputs(batch)).last_hidden_state, batch["labels"], ours.mlm_head,
        label_positions(batch)))

    def theirs(attention: str) -> Implementation:
        model = reference(arch, ours, "mlm", attention)
        return Implementation(model, lambda: _flat_cross_entropy(
            model(input_ids=batch["input_ids"]).logits, batch["labels"]))

    return _with_references(workload, theirs)


def _generative_pretrain(arch: Arch, config, batch_size: int, length: int,
                         device: torch.device) -> Workload:
    """An encoder-decoder's denoising / span-corruption step, or a decoder's causal-LM step:
    cross-entropy over the labelled target positions (ours computes their logits only)."""
    seq2seq = arch.kind == "encoder-decoder"
    ours = arch.pretraining(config).to(device)
    batch = on_device(device, (seq2seq_batch if seq2seq else causal_batch)(arch, config, batch_size,
                                                                       length))
    inputs = {k: batch[k] for k in ("input_ids", "decoder_input_ids") if k in batch}
    positions = label_positions(batch)
    workload = Workload("pretrain", True, batch, (1 + seq2seq) * batch_size * length,
                        f"{batch_size} x ({length} + {length})" if seq2seq
                        else f"{batch_size} x {length}")

    def our_loss() -> Tensor:
        hidden = ours(**inputs).last_hidden_state
        return F.cross_entropy(ours.logits(at_positions(hidden, positions)),
                               at_positions(batch["labels"], positions))

    workload.implementations["plmbench"] = Implementation(ours, our_loss)

    def theirs(attention: str) -> Implementation:
        model = reference(arch, ours, "pretraining", attention)
        return Implementation(model, lambda: _flat_cross_entropy(model(**inputs).logits,
                                                                 batch["labels"]))

    return _with_references(workload, theirs)


def padded(run: Callable[[], Tensor]) -> Callable[[], Tensor]:
    """``run`` with padded batches kept padded (``attention.kept_padded``): the "plmbench padded"
    rows, what running them unpadded (``Unpadding``, ``varlen_attention``) gains."""
    def kept() -> Tensor:
        with kept_padded():
            return run()
    return kept


@register_workload("finetune")
def finetune(arch: Arch, config, batch_size: int, length: int,
             device: torch.device) -> Workload | None:
    """None where the architecture has no classification head (or transformers no class)."""
    if arch.classification_head is None or "classifier" not in arch.hf.classes:
        return None
    encoder = arch.encoder(config)
    head = arch.classification_head(config, 2, 0.1)
    module = LitClassifier(encoder, arch.capabilities, head, 2, [], [], {}).to(device)
    batch = on_device(device, padded_batch(arch, config, batch_size, length))
    workload = Workload("finetune", True, batch, int(batch["attention_mask"].sum()),
                        f"{batch_size} x {length}")
    workload.implementations["plmbench"] = Implementation(
        module, lambda: module.loss(module(batch), batch["labels"]))
    workload.implementations["plmbench padded"] = Implementation(
        module, padded(lambda: module.loss(module(batch), batch["labels"])))

    def theirs(attention: str) -> Implementation:
        model = reference(arch, encoder, "classifier", attention, head)
        inputs = _inputs(batch, ("input_ids", "attention_mask", "token_type_ids"))
        return Implementation(model, lambda: F.cross_entropy(model(**inputs).logits,
                                                             batch["labels"]))

    return _with_references(workload, theirs)


@register_workload("inference")
def inference(arch: Arch, config, batch_size: int, length: int,
              device: torch.device) -> Workload:
    ours = arch.encoder(config).to(device)
    if arch.kind == "encoder-decoder":
        batch = on_device(device, seq2seq_batch(arch, config, batch_size, length))
        keys, tokens = ("input_ids", "decoder_input_ids"), 2 * batch_size * length
        shape = f"{batch_size} x ({length} + {length})"
        inputs = {k: batch[k] for k in keys}
    else:
        batch = on_device(device, padded_batch(arch, config, batch_size, length))
        keys, tokens = ("input_ids", "attention_mask", "token_type_ids"), int(
            batch["attention_mask"].sum())
        shape = f"{batch_size} x {length}"
        inputs = encoder_inputs(batch)
    workload = Workload("inference", False, batch, tokens, shape)
    workload.implementations["plmbench"] = Implementation(
        ours, lambda: ours(**inputs).last_hidden_state)
    if arch.kind != "encoder-decoder":
        workload.implementations["plmbench padded"] = Implementation(
            ours, padded(lambda: ours(**inputs).last_hidden_state))

    def theirs(attention: str) -> Implementation:
        model = reference(arch, ours, "encoder", attention)
        their_inputs = _inputs(batch, keys)
        return Implementation(model, lambda: model(**their_inputs).last_hidden_state)

    return _with_references(workload, theirs)


