"""ALBERT against transformers: random transformers checkpoints (all layers shared, or none)
imported with ``from_hf`` give the same ``last_hidden_state``/pooler (AlbertModel) and masked-LM and
sentence-order logits (AlbertForPreTraining) to 1e-5 in float32 on padded batches; the sharing
modes transformers cannot express are refused on export; the presets' parameter counts are the
paper's (exports, both sharing modes, and the other contracts: ``tests/contracts``)."""

import pytest
import torch

from bench.studies.claims import preset_parameters
from datamodules.collate import pad_collate
from datamodules.errors import PlmbenchError
from datamodules.tokenization import save_tokenizer, train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.interop.hf import from_hf, to_hf
from lit_models.nets.albert import AlbertConfig, AlbertForPreTraining, AlbertModel
from tests.conftest import require
from tests.nets.parity import TEXT, assert_close, randomize_

transformers = require("transformers")

TOLERANCE = 1e-5
ALBERT = get_arch("albert")
#: sizes no other test uses: odd head and layer counts, E < H, both sharing layouts
CONFIGS = [
    dict(hidden_size=36, embedding_size=10, num_hidden_layers=3, num_attention_heads=3,
         intermediate_size=50, hidden_act="gelu_new", max_position_embeddings=83,
         num_hidden_groups=1),
    dict(hidden_size=40, embedding_size=24, num_hidden_layers=3, num_attention_heads=5,
         intermediate_size=64, hidden_act="gelu", max_position_embeddings=96,
         num_hidden_groups=3, layer_norm_eps=1e-6),
]


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(ALBERT.tokenizer, TEXT, vocab_size=200, lowercase=True)


def checkpoint(cls_name, sizes, tokenizer, directory, **extra):
    """A random transformers ALBERT saved with save_pretrained, beside our tokenizer files."""
    values = dict(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.special.pad)
    config = transformers.AlbertConfig(**{**values, **sizes, **extra})
    model = randomize_(getattr(transformers, cls_name)(config))
    model.save_pretrained(directory)
    save_tokenizer(tokenizer, directory, sizes["max_position_embeddings"])
    return model


def pair_batch(tokenizer):
    """Padded sentence pairs with segment ids, as the GLUE datamodule builds them."""
    pairs = [("Dogs jump.", "A cat sat."), ("Hello, world!", TEXT[3]), (TEXT[0], TEXT[2])]
    encodings = tokenizer.truncating(64).encode_batch(pairs)
    examples = [{"input_ids": e.ids, "token_type_ids": e.type_ids} for e in encodings]
    inputs = pad_collate(examples, pad_id=tokenizer.special.pad)
    assert (inputs["attention_mask"] == 0).any() and inputs["token_type_ids"].any()
    return inputs


@pytest.mark.parametrize("sizes", CONFIGS)
def test_from_hf_matches_albert_model(sizes, tokenizer, tmp_path):
    reference = checkpoint("AlbertModel", sizes, tokenizer, tmp_path)
    _, net, loaded_tokenizer = from_hf(tmp_path)
    assert isinstance(net, AlbertModel) and net.pooler is not None
    assert net.config.sharing == ("all" if sizes["num_hidden_groups"] == 1 else "none")
    distinct = {id(layer) for layer in net.encoder.layers}
    assert len(distinct) == sizes["num_hidden_groups"]
    assert loaded_tokenizer.special == tokenizer.special
    inputs = pair_batch(tokenizer)
    with torch.no_grad():
        ours, theirs = net.eval()(**inputs), reference(**inputs)
    assert_close(ours.last_hidden_state, theirs.last_hidden_state, inputs["attention_mask"])
    assert (ours.pooler_output - theirs.pooler_output).abs().max() <= TOLERANCE


@pytest.mark.parametrize("sizes", CONFIGS)
def test_from_hf_matches_albert_for_pretraining(sizes, tokenizer, tmp_path):
    reference = checkpoint("AlbertForPreTraining", sizes, tokenizer, tmp_path)
    _, net, _ = from_hf(tmp_path, with_heads=True)
    assert isinstance(net, AlbertForPreTraining)
    inputs = pair_batch(tokenizer)
    with torch.no_grad():
        out = net.eval()(**inputs)
        theirs = reference(**inputs)
        assert_close(net.mlm_head(out.last_hidden_state), theirs.prediction_logits,
                     inputs["attention_mask"])
        sop = net.sop_head(out.pooler_output)
    assert (sop - theirs.sop_logits).abs().max() <= TOLERANCE
    assert net.nsp_head is net.sop_head


@pytest.mark.parametrize("sharing", ["attention", "ffn"])
def test_partial_sharing_trains_but_has_no_transformers_layout(sharing, tokenizer, tmp_path):
    config = AlbertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, embedding_size=8,
                          num_hidden_layers=3, num_attention_heads=2, intermediate_size=20,
                          sharing=sharing)
    net = AlbertModel(config)
    layers = net.encoder.layers
    shared = "attention" if sharing == "attention" else "feed_forward"
    other = "feed_forward" if sharing == "attention" else "attention"
    assert getattr(layers[0], shared) is getattr(layers[2], shared)
    assert getattr(layers[0], other) is not getattr(layers[2], other)
    with pytest.raises(PlmbenchError, match="no transformers counterpart"):
        to_hf(Model(ALBERT, net, tokenizer), tmp_path / "export")
    assert not (tmp_path / "export").exists()


def test_unsupported_checkpoint_layouts_are_refused(tokenizer, tmp_path):
    sizes = {**CONFIGS[0], "num_hidden_layers": 4, "num_hidden_groups": 2}
    checkpoint("AlbertModel", sizes, tokenizer, tmp_path)
    with pytest.raises(PlmbenchError, match="num_hidden_groups 2 of 4"):
        from_hf(tmp_path)


#: Lan et al. 2020, Table 1 (ALBERT-xxlarge: 223M, see below)
TABLE_1 = {"albert-base-scratch": 12e6, "albert-large-scratch": 18e6, "albert-xlarge-scratch": 60e6,
           "albert-xxlarge-scratch": 223e6, "bert-base-scratch": 108e6, "bert-large-scratch": 334e6}


@pytest.mark.parametrize("preset", sorted(TABLE_1))
def test_presets_have_the_papers_parameter_counts(preset):
    """Within 3% of Table 1. The paper's 235M for ALBERT-xxlarge is not what its architecture
    (L=12, H=4096, E=128, I=16384, V=30000) holds: the released albert-xxlarge-scratch weights and
    transformers' AlbertModel have 222.6M, as ours; the other rows match the paper."""
    assert preset_parameters(preset) == pytest.approx(TABLE_1[preset], rel=0.03)


@pytest.mark.parametrize(("sharing", "embedding_size", "millions"), [
    ("all", 768, 31), ("attention", 768, 83), ("ffn", 768, 57), ("none", 768, 108),
    ("all", 128, 12), ("attention", 128, 64), ("ffn", 128, 38), ("none", 128, 89),
])
def test_sharing_modes_have_the_papers_parameter_counts(sharing, embedding_size, millions):
    """ALBERT-base under each cross-layer sharing mode (Table 4)."""
    count = preset_parameters("albert-base-scratch", f"model.sharing={sharing}",
                              f"model.embedding_size={embedding_size}")
    assert count == pytest.approx(millions * 1e6, rel=0.03)
