"""DeBERTa (v1)'s enhanced mask decoder reads absolute positions only at the end, and a tiny MLM
run through it learns (parity with transformers, for both and either of the c2p/p2c terms and
relative spans shorter and longer than the inputs: ``tests/nets/test_parity.py``; exports and the
other contracts: ``tests/contracts``)."""

import pytest
import torch

from datamodules.tokenization import TextTokenizer, train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.nets.deberta import DebertaConfig, DebertaForMaskedLM
from tests.nets.parity import TEXT, batch, max_diff, randomize_

TOLERANCE = 1e-5
DEBERTA = get_arch("deberta")
#: odd heads and layers, relative spans k shorter than the inputs (clipped distances), c2p and p2c
SIZES = dict(hidden_size=36, num_hidden_layers=3, num_attention_heads=3, intermediate_size=50,
             max_position_embeddings=83, max_relative_positions=5, pos_att_type=["c2p", "p2c"],
             position_biased_input=False, type_vocab_size=0, hidden_act="gelu")


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    return train_tokenizer(DEBERTA.tokenizer, TEXT, vocab_size=300, lowercase=False)


def test_enhanced_mask_decoder_adds_absolute_positions_at_the_end(tokenizer):
    torch.manual_seed(0)
    config = DebertaConfig(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.special.pad,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                           **{**SIZES, "max_relative_positions": 64})
    net = randomize_(DebertaForMaskedLM(config))
    inputs = batch(tokenizer, TEXT[:2])
    positions = net.deberta.embeddings.position_embeddings
    with torch.no_grad():
        encoded = net.deberta(**inputs, output_hidden_states=True)
        decoded = net(**inputs).last_hidden_state
        # without P_abs the encoder is unchanged (it sees relative positions only) ...
        before = decoded.clone()
        positions.weight.zero_()
        assert torch.equal(net.deberta(**inputs).last_hidden_state, encoded.last_hidden_state)
        changed = net(**inputs).last_hidden_state
        assert (changed - before).abs().max() > 1e-3  # ... which only the decoder reads
        # EMD with P_abs = 0 is the last layer run twice more over H_{L-1}
        layer, hidden = net.deberta.encoder.layers[-1], encoded.hidden_states[-2]
        mask = inputs["attention_mask"][:, None, None, :].bool()
        rel = net.deberta.encoder.relative(hidden.shape[1], hidden.device)
        expected = layer(hidden, mask, rel, layer(hidden, mask, rel, hidden))
        assert max_diff(changed, expected, inputs["attention_mask"]) <= TOLERANCE


def test_tiny_mlm_run_lowers_the_loss(tokenizer):
    """MLM through the enhanced mask decoder learns (objective=mlm, DeBERTa's pretraining)."""
    from lit_models.objectives.mlm import MaskedLM

    torch.manual_seed(0)
    net = DebertaForMaskedLM(DebertaConfig(
        vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.special.pad, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=64, max_relative_positions=16))
    objective = MaskedLM()
    objective.check(Model(DEBERTA, net, tokenizer))
    collate = objective.collator(tokenizer, seed=0)
    data = [{"input_ids": e.ids} for e in tokenizer.backend.encode_batch(TEXT)]
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-3)
    history = []
    for step in range(40):
        loss = objective.losses(net, collate(data[step % 5 * 16:][:16]))["mlm_loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append(loss.item())
    assert sum(history[-5:]) < 0.8 * sum(history[:5]), history
