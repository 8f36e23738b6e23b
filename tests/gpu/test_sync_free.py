"""No host-device synchronisation inside a training step (issue 12): whatever a step needs to
know on the host (padding, masked positions, packed rows, FLOPs) the collate decided on the CPU,
so under ``torch.cuda.set_sync_debug_mode("error")`` any synchronising call raises. Each step is
what a run's step does: the batch copied from pinned memory, the loss in bf16 autocast, backward,
BERT's global-norm clip at 1.0 as a run clips (``clip_by_global_norm``), the fused AdamW update,
and the throughput callback's hooks."""

from types import SimpleNamespace

import pytest
import torch

from datamodules.collate import pad_collate
from datamodules.packing import collate_packed, pack_examples
from lit_models.archs import get_arch
from lit_models.core.optim import clip_by_global_norm
from lit_models.families.classify import LitClassifier
from lit_models.families.pretrain import LitPretrain
from lit_models.measure.throughput import Throughput
from lit_models.nets.bert import BertConfig, BertForPreTraining, BertModel
from lit_models.nets.electra import ElectraConfig, ElectraForPreTraining
from lit_models.nets.heads import PooledClassifier
from lit_models.nets.spanbert import SpanBertConfig, SpanBertForPreTraining
from lit_models.objectives.mlm import MaskedLM, MaskingConfig, MLMCollator
from lit_models.objectives.nsp import LABEL_KEYS
from lit_models.objectives.rtd import ReplacedTokenDetection
from lit_models.objectives.span import SpanBoundaryObjective, SpanMaskingCollator, SpanMaskingConfig

CUDA = torch.device("cuda")
VOCAB, SPECIALS = 200, 5
SIZES = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=128, max_position_embeddings=64)


class Tokenizer:
    """What the collators read from a tokenizer: special ids by role, the vocabulary, words."""

    special = SimpleNamespace(pad=0, unk=1, cls=2, sep=3, mask=4, ids={0, 1, 2, 3, 4})
    vocab_size = VOCAB
    backend = SimpleNamespace(get_added_tokens_decoder=dict)

    def word_start_mask(self) -> torch.Tensor:
        return torch.arange(VOCAB) % 3 != 1  # every third piece continues a word


def examples(n: int, pairs: bool = False) -> list[dict]:
    generator = torch.Generator().manual_seed(n)
    out = []
    for i in range(n):
        length = int(torch.randint(8, 40, (1,), generator=generator))
        ids = [2, *torch.randint(SPECIALS, VOCAB, (length,), generator=generator).tolist(), 3]
        example = {"input_ids": ids, "token_type_ids": [0] * len(ids)}
        out.append({**example, LABEL_KEYS["nsp"]: i % 2} if pairs else example)
    return out


def pinned(batch: dict) -> dict:
    return {k: v.pin_memory() for k, v in batch.items()}


def steps(module, loss_fn, batches: list[dict]) -> None:
    """Warm up on the first batch, then take a step per batch with synchronisation an error."""
    module.to(CUDA).train()
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-4, fused=True)
    throughput = Throughput(read_every=10_000)
    throughput.peak_flops = None

    def step(i: int, batch: dict) -> None:
        batch = {k: v.to(CUDA, non_blocking=True) for k, v in batch.items()}
        trainer = SimpleNamespace(global_step=i + 1)
        throughput.on_train_batch_start(trainer, module, batch, i)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_by_global_norm(module.parameters(), 1.0)
        optimizer.step()
        throughput.on_train_batch_end(trainer, module, loss, batch, i)

    step(0, batches[0])
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for i, batch in enumerate(batches[1:], start=1):
            step(i, batch)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    throughput._read()
    assert throughput.tokens > 0


def pretraining_batches(collator, packed: bool, pairs: bool = False) -> list[dict]:
    rows = examples(24, pairs)
    if packed:
        rows = pack_examples(rows, 64)
    size = len(rows) // 3
    return [pinned(collator(rows[i:i + size])) for i in range(0, 3 * size, size)]


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("pairs", [False, True])
def test_masked_lm_steps(packed, pairs):
    objective = MaskedLM(nsp=pairs)
    module = LitPretrain(BertForPreTraining(BertConfig(**SIZES)), objective, {}, [])
    collator = MLMCollator(Tokenizer(), MaskingConfig(whole_word=True), seed=0)
    batches = pretraining_batches(collator, packed, pairs)
    assert packed == ("sequence_ids" in batches[0])
    assert all("label_positions" in b for b in batches)
    steps(module, lambda b: sum(objective.losses(module.net, b).values()), batches)


def test_replaced_token_detection_steps():
    objective = ReplacedTokenDetection()
    net = ElectraForPreTraining(ElectraConfig(**SIZES, embedding_size=32))
    module = LitPretrain(net, objective, {}, [])
    batches = pretraining_batches(MLMCollator(Tokenizer(), MaskingConfig(), seed=0), True)
    steps(module, lambda b: sum(objective.losses(module.net, b).values()), batches)


def test_span_boundary_steps():
    objective = SpanBoundaryObjective()
    module = LitPretrain(SpanBertForPreTraining(SpanBertConfig(**SIZES)), objective, {}, [])
    collator = SpanMaskingCollator(Tokenizer(), SpanMaskingConfig(), seed=0)
    steps(module, lambda b: sum(objective.losses(module.net, b).values()),
          pretraining_batches(collator, True))


def test_classification_steps():
    config = BertConfig(**SIZES)
    module = LitClassifier(BertModel(config), get_arch("bert").capabilities,
                           PooledClassifier(config, 2, 0.1), 2, [], [], {})
    rows = examples(24)
    batches = []
    for i in range(0, 24, 8):
        batch = pad_collate([{**r, "labels": i % 2} for r in rows[i:i + 8]], pad_id=0)
        batches.append(pinned(batch))
    assert all("attention_mask" in b for b in batches)  # padded: the mask path too
    steps(module, lambda b: module.loss(module(b), b["labels"]), batches)


def test_packed_rows_without_padding_take_the_maskless_path():
    """A batch of full packed-across-documents rows carries no mask at all."""
    rows = pack_examples([{"input_ids": [2, *range(10, 72), 3], "token_type_ids": [0] * 64}] * 6,
                         64)
    batch = collate_packed(rows, pad_id=0)
    assert "attention_mask" not in batch and "sequence_ids" not in batch
