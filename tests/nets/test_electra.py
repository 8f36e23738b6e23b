"""ELECTRA's pretraining pair shares its embeddings and round-trips its generator; embeddings are
projected only when narrower than the layers (parity with transformers of ``ElectraModel``, the
discriminator and the generator: ``tests/nets/test_parity.py``; the other exports and contracts:
``tests/contracts``)."""

import pytest
import torch

from datamodules.tokenization import TextTokenizer, train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.interop.hf import from_hf, to_hf
from lit_models.nets.electra import (
    ElectraConfig,
    ElectraForPreTraining,
    ElectraModel,
    generator_config,
)
from tests.conftest import require
from tests.nets.parity import (
    TEXT,
    max_diff,
    randomize_,
    segments,
)

transformers = require("transformers")

TOLERANCE = 1e-5
ELECTRA = get_arch("electra")
#: sizes no other test uses: odd heads, layers and positions; embeddings narrower than the layers
#: (projected) or as wide (no projection); tanh GELU
CONFIGS = [
    dict(embedding_size=20, hidden_size=36, num_hidden_layers=3, num_attention_heads=3,
         intermediate_size=50, hidden_act="gelu_new", max_position_embeddings=83),
    dict(embedding_size=28, hidden_size=28, num_hidden_layers=1, num_attention_heads=7,
         intermediate_size=44, hidden_act="gelu", max_position_embeddings=61),
]


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    return train_tokenizer(ELECTRA.tokenizer, TEXT, vocab_size=300, lowercase=True)


PAIRS = [(TEXT[0], TEXT[1]), (TEXT[2], "Birds sing."), ("Dogs jump.", TEXT[3])]


@pytest.mark.parametrize("sizes", CONFIGS)
def test_embeddings_are_projected_only_when_narrower(sizes):
    """ELECTRA's embeddings (E) feed the layers (H) through a projection only where E < H, as
    transformers' ``embeddings_project`` (the values: ``tests/nets/test_parity.py``)."""
    net = ElectraModel(ElectraConfig(vocab_size=50, **sizes))
    assert net.pooler is None
    assert (net.embeddings_project is None) == (sizes["embedding_size"] == sizes["hidden_size"])


def test_generator_shares_the_embeddings_and_is_a_fraction_of_the_discriminator():
    config = ElectraConfig(vocab_size=50, embedding_size=16, hidden_size=64,
                           num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                           generator_size=0.5)
    net = ElectraForPreTraining(config)
    generator = net.generator.config
    assert (generator.hidden_size, generator.num_attention_heads,
            generator.intermediate_size) == (32, 2, 64)
    assert net.generator.electra.embeddings is net.electra.embeddings
    assert net.generator.mlm_head.word_embeddings is net.electra.embeddings.word_embeddings
    assert net.generator.electra.embeddings_project.in_features == 16
    assert generator_config(ElectraConfig(generator_size=0.25)).num_attention_heads == 1
    with pytest.raises(ValueError, match="generator_size"):
        ElectraForPreTraining(ElectraConfig(generator_size=1.5))


def test_to_hf_round_trips_discriminator_and_generator(tokenizer, tmp_path):
    config = ElectraConfig(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.special.pad,
                           generator_size=1 / 3, **CONFIGS[0])
    ours = randomize_(ElectraForPreTraining(config))
    to_hf(Model(ELECTRA, ours, tokenizer), tmp_path / "pair")
    theirs = transformers.AutoModelForPreTraining.from_pretrained(tmp_path / "pair").eval()
    assert type(theirs).__name__ == "ElectraForPreTraining"
    inputs = segments(tokenizer, PAIRS)
    with torch.no_grad():
        logits = ours.rtd_head(ours(**inputs).last_hidden_state)
        assert max_diff(logits, theirs(**inputs).logits, inputs["attention_mask"]) <= TOLERANCE
        # our own import restores the generator too, to continue pretraining
        _, again, _ = from_hf(tmp_path / "pair", with_heads=True)
        state, restored = ours.state_dict(), again.state_dict()
        assert all(torch.equal(state[k], restored[k]) for k in state)

        to_hf(Model(ELECTRA, ours.generator, tokenizer), tmp_path / "generator")
        generator = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "generator")
        assert type(generator).__name__ == "ElectraForMaskedLM"
        logits = ours.generator.mlm_head(ours.generator(**inputs).last_hidden_state)
        assert max_diff(logits, generator.eval()(**inputs).logits,
                        inputs["attention_mask"]) <= TOLERANCE
