"""DeBERTa (v1) against transformers: random transformers checkpoints imported with ``from_hf``
give the same ``last_hidden_state`` (DebertaModel) and masked-LM logits (DebertaForMaskedLM) to
1e-5 in float32 on padded batches, for both and either of the c2p/p2c terms and relative spans
shorter and longer than the inputs; the enhanced mask decoder reads absolute positions only at
the end (exports and the other contracts: ``tests/contracts``)."""

import pytest
import torch

from datamodules.tokenization import TextTokenizer, save_tokenizer, train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.interop.hf import from_hf
from lit_models.nets.deberta import DebertaConfig, DebertaForMaskedLM, DebertaModel
from tests.conftest import require
from tests.nets.parity import TEXT, batch, max_diff, randomize_

transformers = require("transformers")

TOLERANCE = 1e-5
DEBERTA = get_arch("deberta")
#: sizes no other test uses: odd heads and layers; relative spans k shorter than the inputs
#: (clipped distances) and longer; c2p and p2c together and alone; absolute positions in the
#: input or not; segment embeddings or none
CONFIGS = [
    dict(hidden_size=36, num_hidden_layers=3, num_attention_heads=3, intermediate_size=50,
         max_position_embeddings=83, max_relative_positions=5, pos_att_type=["c2p", "p2c"],
         position_biased_input=False, type_vocab_size=0, hidden_act="gelu"),
    dict(hidden_size=28, num_hidden_layers=2, num_attention_heads=7, intermediate_size=44,
         max_position_embeddings=61, max_relative_positions=-1, pos_att_type="p2c",
         position_biased_input=True, type_vocab_size=2, hidden_act="gelu_new"),
    dict(hidden_size=20, num_hidden_layers=1, num_attention_heads=5, intermediate_size=24,
         max_position_embeddings=64, max_relative_positions=11, pos_att_type=["c2p"],
         position_biased_input=True, type_vocab_size=0, hidden_act="gelu"),
]


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    return train_tokenizer(DEBERTA.tokenizer, TEXT, vocab_size=300, lowercase=False)


def checkpoint(cls_name: str, sizes: dict, tokenizer: TextTokenizer, directory, **extra):
    values = dict(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.special.pad,
                  relative_attention=True, layer_norm_eps=1e-7)
    config = transformers.DebertaConfig(**{**values, **sizes, **extra})
    model = randomize_(getattr(transformers, cls_name)(config))
    model.save_pretrained(directory)
    save_tokenizer(tokenizer, directory, sizes["max_position_embeddings"])
    return model


@pytest.mark.parametrize("sizes", CONFIGS)
def test_from_hf_matches_deberta_model(sizes, tokenizer, tmp_path):
    reference = checkpoint("DebertaModel", sizes, tokenizer, tmp_path)
    _, net, loaded = from_hf(tmp_path)
    assert isinstance(net, DebertaModel) and loaded.special == tokenizer.special
    inputs = batch(tokenizer, TEXT[:4])
    assert (inputs["attention_mask"] == 0).any() and inputs["input_ids"].shape[1] > 11
    with torch.no_grad():
        ours = net.eval()(**inputs).last_hidden_state
        theirs = reference(**inputs).last_hidden_state
    assert max_diff(ours, theirs, inputs["attention_mask"]) <= TOLERANCE


@pytest.mark.parametrize("sizes", CONFIGS[1:])
def test_from_hf_matches_deberta_for_masked_lm(sizes, tokenizer, tmp_path):
    """With absolute positions in the input there is no enhanced mask decoder (as released)."""
    reference = checkpoint("DebertaForMaskedLM", sizes, tokenizer, tmp_path)
    _, net, _ = from_hf(tmp_path, with_heads=True)
    assert isinstance(net, DebertaForMaskedLM)
    inputs = batch(tokenizer, TEXT[4:8])
    with torch.no_grad():
        ours = net.mlm_head(net.eval()(**inputs).last_hidden_state)
        theirs = reference(**inputs).logits
    assert max_diff(ours, theirs, inputs["attention_mask"]) <= TOLERANCE


def test_enhanced_mask_decoder_adds_absolute_positions_at_the_end(tokenizer):
    torch.manual_seed(0)
    config = DebertaConfig(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.special.pad,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                           **{**CONFIGS[0], "max_relative_positions": 64})
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
