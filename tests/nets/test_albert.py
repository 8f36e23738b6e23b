"""ALBERT's cross-layer sharing: transformers' checkpoints (all layers shared, or none) import
with the sharing their layer groups say; the sharing modes transformers cannot express are refused
on export; the presets' parameter counts are the paper's (parity with transformers, both sharing
modes: ``tests/nets/test_parity.py``; exports and the other contracts: ``tests/contracts``)."""

import pytest

from bench.studies.claims import preset_parameters
from datamodules.errors import PlmbenchError
from datamodules.tokenization import save_tokenizer, train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.interop.hf import from_hf, to_hf
from lit_models.nets.albert import AlbertConfig, AlbertForPreTraining, AlbertModel
from tests.conftest import require
from tests.nets.parity import TEXT, randomize_

transformers = require("transformers")

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


@pytest.mark.parametrize("sizes", CONFIGS)
def test_layer_groups_import_as_the_sharing(sizes, tokenizer, tmp_path):
    """One group of layers is ``sharing="all"`` (one layer object at every depth), a group per
    layer ``"none"``; the sentence-order head answers as the next-sentence one (the values:
    ``tests/nets/test_parity.py``)."""
    checkpoint("AlbertForPreTraining", sizes, tokenizer, tmp_path)
    net = from_hf(tmp_path).net
    assert isinstance(net, AlbertModel) and net.pooler is not None
    assert net.config.sharing == ("all" if sizes["num_hidden_groups"] == 1 else "none")
    assert len({id(layer) for layer in net.encoder.layers}) == sizes["num_hidden_groups"]
    pretraining = from_hf(tmp_path, with_heads=True).net
    assert isinstance(pretraining, AlbertForPreTraining)
    assert pretraining.nsp_head is pretraining.sop_head


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
