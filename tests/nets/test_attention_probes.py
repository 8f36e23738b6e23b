"""Attention probabilities and head masks in every architecture, against transformers.

- ``output_attentions=True``: each layer's probabilities sum to 1 over the keys and equal
  transformers' eager ``output_attentions`` (T5/BART: ``encoder_attentions``; Longformer: its
  window band and global rows, laid out densely) at every real query, to 1e-5 in float32 on
  padded batches of random checkpoints.
- ``head_mask`` (transformers 5 dropped its own): a mask of zeros for some heads gives exactly
  the outputs of the net with those heads removed from its weights (``prune_heads``), and, for
  the architectures whose transformers attention reads its head count from its weights, the
  outputs of transformers' model with the same heads cut out of its weight matrices.
- The default path (no probe) is untouched: outputs with and without ``output_attentions`` agree.
"""

import pytest
import torch

from lit_models.archs import get_arch
from lit_models.interop.hf import load_hf_state_dict, read_config
from tests.conftest import require
from tests.nets.parity import TOLERANCE, randomize_

transformers = require("transformers")

#: arch -> (transformers config class, sizes, model class); odd head counts, small widths
SIZES = dict(hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=30)
CHECKPOINTS = {
    "bert": ("BertConfig", dict(SIZES, max_position_embeddings=32), "BertModel"),
    "spanbert": ("BertConfig", dict(SIZES, max_position_embeddings=32), "BertModel"),
    "roberta": ("RobertaConfig", dict(SIZES, max_position_embeddings=34, type_vocab_size=1),
                "RobertaModel"),
    "albert": ("AlbertConfig", dict(SIZES, embedding_size=10, max_position_embeddings=32),
               "AlbertModel"),
    "distilbert": ("DistilBertConfig", dict(dim=24, n_layers=2, n_heads=3, hidden_dim=30,
                                            max_position_embeddings=32), "DistilBertModel"),
    "electra": ("ElectraConfig", dict(SIZES, embedding_size=12, max_position_embeddings=32),
                "ElectraModel"),
    "deberta": ("DebertaConfig", dict(SIZES, max_position_embeddings=32, relative_attention=True,
                                      max_relative_positions=6, pos_att_type=["c2p", "p2c"],
                                      type_vocab_size=0), "DebertaModel"),
    "xlnet": ("XLNetConfig", dict(d_model=24, n_layer=2, n_head=3, d_inner=30), "XLNetModel"),
    "longformer": ("LongformerConfig", dict(SIZES, max_position_embeddings=40, type_vocab_size=1,
                                            attention_window=[4, 6]), "LongformerModel"),
    "gpt2": ("GPT2Config", dict(n_embd=24, n_layer=2, n_head=3, n_positions=32, bos_token_id=0,
                                eos_token_id=2), "GPT2Model"),
    "t5": ("T5Config", dict(d_model=24, d_kv=6, d_ff=30, num_layers=2, num_heads=3,
                            relative_attention_num_buckets=8, relative_attention_max_distance=16),
           "T5Model"),
    "bart": ("BartConfig", dict(d_model=24, encoder_layers=2, decoder_layers=1,
                                encoder_attention_heads=3, decoder_attention_heads=3,
                                encoder_ffn_dim=30, decoder_ffn_dim=30,
                                max_position_embeddings=32), "BartModel"),
}
VOCAB, PAD = 300, 1  # room for a trained tokenizer (a byte-level one has 256 ids before merges)
LENGTHS = (12, 5, 9)


def models(name: str, tmp_path):
    """A random transformers model with eager attention and ours with its weights."""
    config_class, sizes, model_class = CHECKPOINTS[name]
    config = getattr(transformers, config_class)(vocab_size=VOCAB, pad_token_id=PAD, **sizes,
                                                 attn_implementation="eager")
    theirs = randomize_(getattr(transformers, model_class)(config))
    theirs.save_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_text("")  # read_config wants tokenizer files beside
    arch, ours_config = read_config(tmp_path, get_arch(name))
    ours = arch.encoder(ours_config)
    load_hf_state_dict(ours, theirs.state_dict(), arch.hf)
    return arch, ours.eval(), theirs


def padded_batch(name: str) -> dict[str, torch.Tensor]:
    torch.manual_seed(1)
    T = max(LENGTHS)
    mask = (torch.arange(T)[None] < torch.tensor(LENGTHS)[:, None]).long()
    ids = torch.randint(3, VOCAB, mask.shape).masked_fill(mask == 0, PAD)
    return {"input_ids": ids, "attention_mask": mask}


def run(arch, net, inputs, **options):
    with torch.no_grad():
        out = net(**inputs, **options)
    if arch.kind == "encoder-decoder":
        return out.encoder_last_hidden_state, out.encoder_attentions
    return out.last_hidden_state, out.attentions


def dense_longformer(out, window_sizes, T: int) -> list[torch.Tensor]:
    """transformers' Longformer attentions ([B, heads, T, G + 2w + 1]: the global keys' columns,
    then the band j = i - w .. i + w; global queries' rows in ``global_attentions``) as dense
    [B, heads, T, T], for the batch's global positions (<s> of each row here)."""
    dense = []
    for layer, (local, glob) in enumerate(zip(out.attentions, out.global_attentions,
                                                      strict=True)):
        w = window_sizes[layer] // 2
        B, H, Tp, _ = local.shape
        full = torch.zeros(B, H, Tp, Tp + 2 * w)
        band = local[..., 1:]  # one global key: <s> at position 0
        for i in range(Tp):
            full[:, :, i, i:i + 2 * w + 1] = band[:, :, i]
        full = full[..., w:w + Tp]
        full[..., 0] += local[..., 0]
        full[:, :, 0, :] = glob[..., 0]  # the global query's row ([B, heads, T, G])
        dense.append(full[:, :, :T, :T])
    return dense


@pytest.mark.parametrize("name", list(CHECKPOINTS))
def test_attention_probabilities_sum_to_one_and_equal_transformers(name, tmp_path):
    arch, ours, theirs = models(name, tmp_path)
    inputs = padded_batch(name)
    extra = {}
    if name == "longformer":
        extra["global_attention_mask"] = torch.zeros_like(inputs["input_ids"])
        extra["global_attention_mask"][:, 0] = 1
    if arch.kind == "encoder-decoder":  # the encoder's attentions; any decoder inputs
        extra["decoder_input_ids"] = inputs["input_ids"][:, :3]
    hidden, attentions = run(arch, ours, {**inputs, **extra}, output_attentions=True)
    plain, none = run(arch, ours, {**inputs, **extra})
    assert none is None and (hidden - plain).abs().max() <= TOLERANCE  # SDPA path agrees
    with torch.no_grad():
        out = theirs(**inputs, **extra, output_attentions=True)
    reference = out.encoder_attentions if arch.kind == "encoder-decoder" else out.attentions
    if name == "longformer":
        reference = dense_longformer(out, CHECKPOINTS[name][1]["attention_window"],
                                     inputs["input_ids"].shape[1])
    real = inputs["attention_mask"].bool()
    assert len(attentions) == len(reference) == 2
    for layer, (mine, them) in enumerate(zip(attentions, reference, strict=True)):
        assert mine.shape == them.shape == (3, 3, max(LENGTHS), max(LENGTHS)), layer
        rows = mine.transpose(1, 2)[real]  # [real queries, heads, keys]
        assert (rows.sum(-1) - 1).abs().max() <= 1e-5
        assert (rows - them.transpose(1, 2)[real]).abs().max() <= TOLERANCE, layer
        keys = real.repeat_interleave(real.sum(1), 0)[:, None]  # each query's row's keys
        assert rows.masked_select(~keys.expand_as(rows)).abs().max() == 0  # pads unseen


#: (layer, heads) removed in the head-mask tests: a layer left with one head, one with none
REMOVED = {0: [0, 2], 1: [0, 1, 2]}


def zero_mask(heads: int, layers: int = 2) -> torch.Tensor:
    mask = torch.ones(layers, heads)
    for layer, ids in REMOVED.items():
        mask[layer, ids] = 0
    return mask


@pytest.mark.parametrize("name", [n for n in CHECKPOINTS if n not in ("t5", "bart", "albert")])
def test_a_zero_head_mask_equals_removing_the_heads(name, tmp_path):
    arch, ours, _ = models(name, tmp_path)
    inputs = padded_batch(name)
    masked, _ = run(arch, ours, inputs, head_mask=zero_mask(3))
    unmasked, _ = run(arch, ours, inputs)
    ours.prune_heads(REMOVED)
    assert ours.heads_per_layer() == [1, 0]
    assert ours.config.pruned_heads == REMOVED
    pruned, attentions = run(arch, ours, inputs, output_attentions=True)
    real = inputs["attention_mask"].bool()
    assert (masked - pruned)[real].abs().max() <= TOLERANCE
    assert (masked - unmasked)[real].abs().max() > 1e-3  # the heads mattered
    assert [a.shape[1] for a in attentions] == [1, 0]
    # a mask over the heads that remain: one tensor per layer
    again, _ = run(arch, ours, inputs, head_mask=[torch.ones(1), torch.ones(0)])
    assert (again - pruned)[real].abs().max() <= TOLERANCE


#: transformers' attention modules whose projections can lose heads (their head count is read
#: from the weights): arch -> per layer (query, key, value, output) module names
TRANSFORMERS_PROJECTIONS = {
    "bert": ("encoder.layer.{i}.attention.self.{p}", ("query", "key", "value"),
             "encoder.layer.{i}.attention.output.dense"),
    "roberta": ("encoder.layer.{i}.attention.self.{p}", ("query", "key", "value"),
                "encoder.layer.{i}.attention.output.dense"),
    "electra": ("encoder.layer.{i}.attention.self.{p}", ("query", "key", "value"),
                "encoder.layer.{i}.attention.output.dense"),
    "distilbert": ("transformer.layer.{i}.attention.{p}", ("q_lin", "k_lin", "v_lin"),
                   "transformer.layer.{i}.attention.out_lin"),
}


def cut_heads(model, name: str, removed: dict[int, list[int]], heads: int, head_dim: int):
    """Slice the removed heads out of transformers' projection matrices, by hand."""
    template, projections, output = TRANSFORMERS_PROJECTIONS[name]
    for layer, ids in removed.items():
        keep = [h for h in range(heads) if h not in ids]
        index = torch.tensor([h * head_dim + j for h in keep for j in range(head_dim)],
                             dtype=torch.long)
        for p in projections:
            linear = model.get_submodule(template.format(i=layer, p=p))
            linear.weight.data = linear.weight.data[index]
            linear.bias.data = linear.bias.data[index]
        out = model.get_submodule(output.format(i=layer))
        out.weight.data = out.weight.data[:, index]


@pytest.mark.parametrize("name", list(TRANSFORMERS_PROJECTIONS))
def test_a_zero_head_mask_equals_transformers_with_the_heads_cut_out(name, tmp_path):
    arch, ours, theirs = models(name, tmp_path)
    inputs = padded_batch(name)
    masked, _ = run(arch, ours, inputs, head_mask=zero_mask(3))
    removed = {0: [1]}  # transformers cannot run a layer with no head left
    one_head, _ = run(arch, ours, inputs, head_mask=torch.tensor([[1.0, 0, 1], [1, 1, 1]]))
    cut_heads(theirs, name, removed, 3, 8)
    with torch.no_grad():
        reference = theirs(**inputs).last_hidden_state
    real = inputs["attention_mask"].bool()
    assert (one_head - reference)[real].abs().max() <= TOLERANCE
    assert (masked - one_head)[real].abs().max() > 1e-3


def test_albert_shares_its_heads_so_masks_them_but_refuses_to_prune(tmp_path):
    arch, ours, _ = models("albert", tmp_path)
    inputs = padded_batch("albert")
    masked, _ = run(arch, ours, inputs, head_mask=zero_mask(3))
    assert torch.isfinite(masked).all()
    with pytest.raises(ValueError, match="share their attention"):
        ours.prune_heads(REMOVED)


def test_per_example_head_masks_give_per_example_gradients(tmp_path):
    """A [B, layers, heads] mask: example b's gradient is d loss_b / d xi (Michel et al. 2019,
    Eq. 2's expectation of an absolute value needs each example's)."""
    arch, ours, _ = models("bert", tmp_path)
    inputs = padded_batch("bert")
    B = inputs["input_ids"].shape[0]
    mask = torch.ones(B, 2, 3, requires_grad=True)
    out = ours(**inputs, head_mask=mask).last_hidden_state
    losses = out.pow(2).mean((1, 2))
    losses.sum().backward()
    for b in range(B):
        single = torch.ones(2, 3, requires_grad=True)
        row = {k: v[b:b + 1] for k, v in inputs.items()}
        loss = ours(**row, head_mask=single).last_hidden_state.pow(2).mean()
        (grad,) = torch.autograd.grad(loss, single)
        assert (mask.grad[b] - grad).abs().max() <= 1e-5


@pytest.mark.parametrize("name", ["bert", "deberta"])
def test_a_pruned_net_exports_smaller_and_imports_as_it_was(name, tmp_path):
    from datamodules.tokenization import train_tokenizer
    from lit_models.archs import Model
    from lit_models.interop.hf import from_hf, to_hf
    from tests.nets.parity import TEXT

    arch, ours, _ = models(name, tmp_path / "full")
    tokenizer = train_tokenizer(arch.tokenizer, TEXT, vocab_size=VOCAB, lowercase=False)
    inputs = padded_batch(name)
    to_hf(Model(arch, ours, tokenizer), tmp_path / "unpruned")
    ours.prune_heads(REMOVED)
    expected, _ = run(arch, ours, inputs)
    to_hf(Model(arch, ours, tokenizer), tmp_path / "pruned")
    _, again, _ = from_hf(tmp_path / "pruned")
    assert again.heads_per_layer() == [1, 0] and again.config.pruned_heads == REMOVED
    loaded, _ = run(arch, again.eval(), inputs)
    assert (loaded - expected).abs().max() == 0
    size = {d: (tmp_path / d / "model.safetensors").stat().st_size for d in ("unpruned", "pruned")}
    assert size["pruned"] < size["unpruned"]
