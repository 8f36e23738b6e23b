"""RoBERTa's own behaviour: fairseq's position numbering past the padding index (parity with
transformers: ``tests/nets/test_parity.py``; exports, the classification head and the other
contracts: ``tests/contracts``)."""

import pytest
import torch

from lit_models.nets.roberta import RobertaConfig, RobertaModel


def test_position_ids_start_past_the_padding_index():
    """fairseq's make_positions: the t-th non-pad token sits at pad + t, pads at pad."""
    config = RobertaConfig(vocab_size=300, hidden_size=8, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=8, max_position_embeddings=12)
    net = RobertaModel(config).eval()
    pad = config.pad_token_id
    ids = torch.tensor([[0, 7, 8, 2, pad, pad], [0, 9, 2, pad, pad, pad]])
    seen = []
    net.embeddings.position_embeddings.register_forward_hook(
        lambda module, args, out: seen.append(args[0]))
    net(ids)
    assert seen[0].tolist() == [[2, 3, 4, 5, 1, 1], [2, 3, 4, 1, 1, 1]]
    assert config.max_length == 10
    with pytest.raises(ValueError, match="exceeds"):
        net(torch.full((1, 11), 5))
