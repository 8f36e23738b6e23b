"""RoBERTa against transformers: random transformers checkpoints imported with ``from_hf`` give the
same ``last_hidden_state`` (RobertaModel) and masked-LM logits (RobertaForMaskedLM) to 1e-5 in
float32 on padded batches (exports, the classification head and the other contracts:
``tests/contracts``)."""

from pathlib import Path

import pytest
import torch

from datamodules.tokenization import TextTokenizer, train_tokenizer
from lit_models.archs import get_arch
from lit_models.interop.hf import from_hf
from lit_models.nets.roberta import RobertaConfig, RobertaForMaskedLM, RobertaModel
from tests.conftest import require
from tests.nets.parity import (
    TEXT,
    TOLERANCE,
    assert_close,
    batch,
    randomize_,
)

transformers = require("transformers")

ROBERTA = get_arch("roberta")
#: sizes no other test uses: odd head, layer and position counts, tanh GELU
CONFIGS = [
    dict(hidden_size=36, num_hidden_layers=3, num_attention_heads=3, intermediate_size=50,
         hidden_act="gelu_new", max_position_embeddings=83),
    dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
         hidden_act="gelu", max_position_embeddings=96, layer_norm_eps=1e-12),
]


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    return train_tokenizer(ROBERTA.tokenizer, TEXT, vocab_size=300, lowercase=False)






def checkpoint(cls_name: str, sizes: dict, tokenizer: TextTokenizer, directory: Path,
               **extra) -> torch.nn.Module:
    """A random transformers RoBERTa saved with save_pretrained, beside our tokenizer files."""
    values = dict(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.special.pad,
                  type_vocab_size=1, layer_norm_eps=1e-5)
    config = transformers.RobertaConfig(**{**values, **sizes, **extra})
    model = randomize_(getattr(transformers, cls_name)(config))
    model.save_pretrained(directory)
    from datamodules.tokenization import save_tokenizer

    save_tokenizer(tokenizer, directory, sizes["max_position_embeddings"] - 2)
    return model




@pytest.mark.parametrize("sizes", CONFIGS)
def test_from_hf_matches_roberta_model(sizes, tokenizer, tmp_path):
    reference = checkpoint("RobertaModel", sizes, tokenizer, tmp_path)
    _, net, loaded_tokenizer = from_hf(tmp_path)
    assert isinstance(net, RobertaModel) and net.pooler is not None
    assert loaded_tokenizer.special == tokenizer.special
    inputs = batch(tokenizer, TEXT[:4])
    assert (inputs["attention_mask"] == 0).any(), "the batch must be padded"
    with torch.no_grad():
        ours = net.eval()(**inputs)
        theirs = reference(**inputs)
    # the real tokens (a padded batch on the CPU runs unpadded: its pads are not computed; how
    # pads are numbered is checked below)
    assert_close(ours.last_hidden_state, theirs.last_hidden_state, inputs["attention_mask"])
    assert (ours.pooler_output - theirs.pooler_output).abs().max() <= TOLERANCE


@pytest.mark.parametrize("sizes", CONFIGS)
def test_from_hf_matches_roberta_for_masked_lm(sizes, tokenizer, tmp_path):
    reference = checkpoint("RobertaForMaskedLM", sizes, tokenizer, tmp_path)
    _, net, _ = from_hf(tmp_path, with_heads=True)
    assert isinstance(net, RobertaForMaskedLM) and not hasattr(net, "nsp_head")
    inputs = batch(tokenizer, TEXT[4:8])
    with torch.no_grad():
        hidden = net.eval()(**inputs).last_hidden_state
        ours = net.mlm_head(hidden)
        theirs = reference(**inputs).logits
    assert_close(ours, theirs, inputs["attention_mask"])


def test_position_ids_start_past_the_padding_index(tokenizer):
    """fairseq's make_positions: the t-th non-pad token sits at pad + t, pads at pad."""
    config = RobertaConfig(vocab_size=tokenizer.vocab_size, hidden_size=8, num_hidden_layers=1,
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
