"""DeBERTa-v2's masked LM against transformers' ``DebertaV2ForMaskedLM`` (the class the generator
exports as): a random transformers checkpoint, under the legacy head names and the released
``lm_predictions`` ones, imported with ``from_hf(with_heads=True)`` gives its logits to 1e-4 on a
padded batch (the encoder's settings: the contract suite, ``tests/contracts``)."""

import pytest
import torch

from datamodules.tokenization import save_tokenizer, train_tokenizer
from lit_models.archs import get_arch
from lit_models.interop.hf import from_hf
from lit_models.nets.deberta_v2 import DebertaV2ForMaskedLM
from tests.conftest import require
from tests.nets.parity import TEXT, batch, max_diff, randomize_

transformers = require("transformers")


@pytest.mark.parametrize("legacy", [True, False])
def test_from_hf_matches_deberta_v2_for_masked_lm(legacy, tmp_path):
    tokenizer = train_tokenizer(get_arch("deberta_v2").tokenizer, TEXT, vocab_size=150,
                                lowercase=False)
    config = transformers.DebertaV2Config(
        vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.special.pad, hidden_size=30,
        num_hidden_layers=2, num_attention_heads=5, intermediate_size=44,
        max_position_embeddings=96, relative_attention=True, position_buckets=10,
        max_relative_positions=24, share_att_key=True, norm_rel_ebd="layer_norm",
        pos_att_type="p2c|c2p", position_biased_input=False, type_vocab_size=0,
        hidden_act="gelu", legacy=legacy)
    reference = randomize_(transformers.DebertaV2ForMaskedLM(config))
    reference.save_pretrained(tmp_path)
    save_tokenizer(tokenizer, tmp_path, 96)
    _, net, _ = from_hf(tmp_path, with_heads=True)
    assert type(net) is DebertaV2ForMaskedLM and net.config.legacy is legacy
    inputs = batch(tokenizer, TEXT[:3])
    assert (inputs["attention_mask"] == 0).any() and inputs["input_ids"].shape[1] > 10
    with torch.no_grad():
        ours = net.mlm_head(net.eval()(**inputs).last_hidden_state)
        theirs = reference(**inputs).logits
    assert max_diff(ours, theirs, inputs["attention_mask"]) <= 1e-4
