"""Packed rows on a GPU: the block-diagonal mask through SDPA's CUDA kernels gives every packed
example the hidden states it gets alone (float32, full-precision matmuls)."""

import torch

from datamodules.collate import encoder_inputs
from datamodules.packing import collate_packed, pack_examples
from tests.nets.test_packed_attention import LENGTHS, examples, pretraining_net

CUDA = torch.device("cuda")


def test_each_packed_example_equals_the_example_alone_on_cuda():
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        net, roles, _ = pretraining_net("bert")
        net = net.to(CUDA)
        alone = examples(roles, two_segments=True)
        rows = pack_examples(alone, 16)
        batch = {k: v.to(CUDA) for k, v in collate_packed(rows, pad_id=roles["pad"]).items()}
        checked = 0
        with torch.no_grad():
            packed = net(**encoder_inputs(batch)).last_hidden_state
            for r, row in enumerate(rows):
                for k in range(1, max(row["sequence_ids"]) + 1):
                    where = batch["sequence_ids"][r] == k
                    ids = batch["input_ids"][r, where]
                    types = batch["token_type_ids"][r, where]
                    single = net(input_ids=ids[None], token_type_ids=types[None])
                    diff = (packed[r, where] - single.last_hidden_state[0]).abs().max().item()
                    assert diff <= 1e-4
                    checked += 1
    finally:
        torch.set_float32_matmul_precision(previous)
    assert checked == len(LENGTHS)
