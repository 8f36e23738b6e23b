"""Packed rows change no loss: the same corrupted examples give the same MLM and NSP / SOP
losses (mean over masked tokens, mean over examples' [CLS] states) packed as unpacked, and the
collators mask packed rows as they mask any row."""

import pytest
import torch

from datamodules.collate import add_label_positions, pad_collate
from datamodules.packing import collate_packed, pack_examples
from lit_models.nets.albert import AlbertConfig, AlbertForPreTraining
from lit_models.nets.bert import BertConfig, BertForPreTraining
from lit_models.objectives.mlm import IGNORE_INDEX, MaskedLM
from lit_models.objectives.nsp import LABEL_KEYS
from tests.nets.parity import randomize_

VOCAB, PAD, CLS, SEP = 90, 0, 2, 3
SIZES = dict(vocab_size=VOCAB, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
             intermediate_size=40, max_position_embeddings=32)


def corrupted_pairs(label_key: str) -> list[dict]:
    """Sentence pairs already masked (labels at about 15% of the tokens) with a pair label."""
    g = torch.Generator().manual_seed(0)
    out = []
    for i, (a, b) in enumerate([(3, 4), (6, 2), (2, 2), (5, 7), (4, 3), (8, 5)]):
        ids = [CLS, *torch.randint(5, VOCAB, (a,), generator=g).tolist(), SEP,
               *torch.randint(5, VOCAB, (b,), generator=g).tolist(), SEP]
        labels = [IGNORE_INDEX] * len(ids)
        for t in range(1, len(ids) - 1):
            if ids[t] != SEP and torch.rand(1, generator=g).item() < 0.3:
                labels[t], ids[t] = ids[t], 4  # [MASK]
        out.append({"input_ids": ids, "token_type_ids": [0] * (a + 2) + [1] * (b + 1),
                    "labels": labels, label_key: i % 2})
    return out


@pytest.mark.parametrize(("net", "objective"), [
    (BertForPreTraining(BertConfig(**SIZES)), MaskedLM(nsp=True)),
    (AlbertForPreTraining(AlbertConfig(**SIZES, embedding_size=16)), MaskedLM(sop=True)),
])
def test_packed_losses_equal_unpacked_losses(net, objective):
    net = randomize_(net)
    examples = corrupted_pairs(LABEL_KEYS[objective.pair_task])
    rows = pack_examples(examples, 24)
    assert len(rows) < len(examples)
    unpacked = add_label_positions(pad_collate(examples, PAD))
    packed = add_label_positions(collate_packed(rows, PAD, LABEL_KEYS.values()))
    with torch.no_grad():
        expected, got = objective.losses(net, unpacked), objective.losses(net, packed)
    assert set(got) == {"mlm_loss", f"{objective.pair_task}_loss"}
    for name, value in expected.items():
        assert got[name].item() == pytest.approx(value.item(), abs=1e-5), name
