"""XLNet against transformers where the registry-wide parity test cannot go: "uni" attention, whose
transformers takes no padded batch (row by row), the content stream under a permutation mask, and
segment recurrence (memories, second-segment states and query-stream logits), to 1e-5 in float32
on padded sentence-pair batches; the sequence-summary classifier round-trips on left-padded
batches; left and right padding give the same states (one segment under "bi" attention, both
streams: ``tests/nets/test_parity.py``; the other exports and contracts: ``tests/contracts``)."""

import pytest
import torch

from datamodules.tokenization import TextTokenizer, save_tokenizer, train_tokenizer
from lit_models.archs import get_arch
from lit_models.interop.hf import from_hf, load_head
from lit_models.nets.xlnet import XLNetConfig, XLNetLMHeadModel, XLNetModel
from tests.conftest import require
from tests.nets.parity import TEXT, TOLERANCE, assert_classifier_round_trips, max_diff, randomize_
from tests.nets.parity import segments as pair_batch

transformers = require("transformers")

XLNET = get_arch("xlnet")
#: sizes no other test uses: odd heads and widths; "uni" attention with clamped distances;
#: memory kept whole (mem_len 0) or cut, with reuse_len
CONFIGS = [
    dict(d_model=30, n_layer=2, n_head=3, d_inner=37, ff_activation="gelu", mem_len=9,
         reuse_len=None),
    dict(d_model=28, n_layer=3, n_head=7, d_inner=40, ff_activation="relu", mem_len=0,
         reuse_len=5, attn_type="uni", clamp_len=4, layer_norm_eps=1e-5),
]
#: same_length: query i sees keys i .. mlen + i, so only with a memory does its query stream
#: see anything (without one transformers attends uniformly where we attend to every key)
SAME_LENGTH = {**CONFIGS[1], "same_length": True}
PAIRS = [("Hello world", "The cat sat on the mat."), ("A dog", "Birds sing in the morning."),
         ("Dogs jump. Cats sleep.", "It was"), ("The quick brown fox.", "Jumped.")]
NEXT = [("It was a bright", "cold day"), ("Cats", "sleep"), ("The lazy dog.", "Hello"),
        ("A ball of wool.", "The clocks were striking thirteen.")]


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    return train_tokenizer(XLNET.tokenizer, TEXT, vocab_size=200, lowercase=False)


def checkpoint(cls_name: str, sizes: dict, tokenizer: TextTokenizer, directory, **extra):
    config = transformers.XLNetConfig(vocab_size=tokenizer.vocab_size, dropout=0.0,
                                      pad_token_id=tokenizer.special.pad, **sizes, **extra)
    model = randomize_(getattr(transformers, cls_name)(config))
    model.save_pretrained(directory)
    save_tokenizer(tokenizer, directory)
    return model


def factorisation(mask: torch.Tensor, num_predict: int, attn_type: str, seed: int = 0):
    """perm_mask (i may not see j unless j comes before i in a random order of each row's
    tokens; pads seen by none) and the target mapping of the order's last ``num_predict``.
    "uni" attention takes the left-to-right order: under another one a target may see no key,
    where transformers attends uniformly and we attend to every key."""
    generator = torch.Generator().manual_seed(seed)
    B, T = mask.shape
    perm_mask = torch.ones(B, T, T)
    target_mapping = torch.zeros(B, num_predict, T)
    for row in range(B):
        tokens = mask[row].nonzero().squeeze(1)
        if attn_type == "bi":
            order = tokens[torch.randperm(len(tokens), generator=generator)]
        else:
            order = tokens
        rank = torch.full((T,), T)
        rank[order] = torch.arange(len(order))
        perm_mask[row] = (rank[None, :] >= rank[:, None]).float()
        for m, position in enumerate(order[-num_predict:]):
            target_mapping[row, m, position] = 1
    return perm_mask, target_mapping


def reference_outputs(model, batch: dict, mems=None, **extra):
    """transformers' ``model`` on ``batch`` (right-padded) with ``extra`` [B, ...] inputs. Its
    "uni" attention cannot take a padding or permutation mask with more than one row, so then
    each row runs alone, unpadded, and the outputs are padded back: (logits or states [B, ...],
    memories [mlen, B, H] per layer or None)."""
    if model.config.attn_type == "bi":
        out = model(**batch, mems=mems, use_mems=mems is not None or None, **extra)
        return out[0], out.mems
    rows, memories = [], []
    for row, n in enumerate(batch["attention_mask"].sum(1).tolist()):
        one = {key: value[row:row + 1, :n] for key, value in batch.items()}
        one |= {key: value[row:row + 1, ..., :n] for key, value in extra.items()}
        if "perm_mask" in extra:
            one["perm_mask"] = extra["perm_mask"][row:row + 1, :n, :n]
        memory = None if mems is None else [m[:, row:row + 1] for m in mems]
        out = model(**one, mems=memory, use_mems=True)
        rows.append(out[0][0])
        memories.append(out.mems)
    T = max(len(r) for r in rows) if "target_mapping" in extra else batch["input_ids"].shape[1]
    padded = torch.stack([torch.nn.functional.pad(r, (0, 0, 0, T - len(r))) for r in rows])
    return padded, [torch.cat(layer, 1) for layer in zip(*memories, strict=True)]


def left_padded(batch: dict) -> dict:
    """The same rows with their pads moved to the front (transformers' XLNet padding side)."""
    lengths = batch["attention_mask"].sum(1)
    T = batch["attention_mask"].shape[1]
    return {key: torch.stack([row.roll(T - int(n), dims=0) for row, n in zip(value, lengths,
                                                                             strict=True)])
            for key, value in batch.items()}


@pytest.mark.parametrize("sizes", CONFIGS)
def test_left_padding_gives_the_states_of_right_padding(sizes, tokenizer):
    """Relative positions only: the same rows padded on the left give each real token the state
    it has padded on the right (parity with transformers on the left-padded batches it takes:
    ``tests/nets/test_parity.py``)."""
    net = randomize_(XLNetModel(XLNetConfig(vocab_size=tokenizer.vocab_size, **sizes))).eval()
    batch = pair_batch(tokenizer, PAIRS)
    assert (batch["attention_mask"] == 0).any() and (batch["token_type_ids"] == 2).any()
    shifts = (batch["attention_mask"] == 0).sum(1).tolist()
    with torch.no_grad():
        right = net(**batch).last_hidden_state
        left = net(**left_padded(batch)).last_hidden_state
    again = torch.stack([row.roll(-shift, dims=0) for row, shift in zip(left, shifts, strict=True)])
    assert max_diff(again, right, batch["attention_mask"]) <= TOLERANCE


@pytest.mark.parametrize("sizes", CONFIGS)
def test_query_stream_logits_match_xlnet_lm_head_model(sizes, tokenizer, tmp_path):
    """Both streams of one segment under "uni" attention too, whose transformers takes no padded
    batch (row by row), and the content stream under the permutation mask (the query stream
    under "bi" attention, with every other role: ``tests/nets/test_parity.py``)."""
    reference = checkpoint("XLNetLMHeadModel", sizes, tokenizer, tmp_path)
    _, net, _ = from_hf(tmp_path, with_heads=True)
    assert isinstance(net, XLNetLMHeadModel)
    assert net.lm_bias.abs().sum() > 0  # the head's bias came along
    batch = pair_batch(tokenizer, PAIRS)
    perm_mask, target_mapping = factorisation(batch["attention_mask"], 3,
                                               reference.config.attn_type)
    with torch.no_grad():
        out = net.eval()(**batch, perm_mask=perm_mask, target_mapping=target_mapping)
        theirs, _ = reference_outputs(reference, batch, perm_mask=perm_mask,
                                      target_mapping=target_mapping)
        assert out.last_hidden_state.shape[1] == 3
        assert (net.logits(out.last_hidden_state) - theirs).abs().max() <= TOLERANCE
        # the content stream under the permutation mask (it also sees its own token)
        ours_h = net(**batch, perm_mask=perm_mask).last_hidden_state
        theirs_h, _ = reference_outputs(reference.transformer, batch, perm_mask=perm_mask)
        assert max_diff(ours_h, theirs_h, batch["attention_mask"]) <= TOLERANCE


@pytest.mark.parametrize("sizes", [*CONFIGS, SAME_LENGTH])
def test_segment_recurrence_matches_transformers(sizes, tokenizer, tmp_path):
    """The first segment's memories, and the second segment attending over them."""
    reference = checkpoint("XLNetLMHeadModel", sizes, tokenizer, tmp_path)
    _, net, _ = from_hf(tmp_path, with_heads=True)
    first, second = pair_batch(tokenizer, PAIRS), pair_batch(tokenizer, NEXT)
    n = int(first["attention_mask"].sum(1).min())  # a first segment without padding
    first = {key: value[:, :n] for key, value in first.items() if key != "attention_mask"}
    with torch.no_grad():
        ours = net.eval()(**first, use_mems=True)
        theirs = reference(**first, use_mems=True)  # unpadded: no mask, any attn_type
        expected = min(sizes["mem_len"] or n, sizes["reuse_len"] or n)
        for mine, their in zip(ours.mems, theirs.mems, strict=True):
            assert mine.shape[1] == expected
            assert (mine - their.transpose(0, 1)).abs().max() <= TOLERANCE
        ours2 = net(**second, mems=ours.mems, use_mems=True)
        theirs2, their_mems = reference_outputs(reference, second, mems=theirs.mems)
        logits = net.logits(ours2.last_hidden_state)
        assert max_diff(logits, theirs2, second["attention_mask"]) <= TOLERANCE
        if reference.config.attn_type == "bi":  # ("uni" ran row by row, unpadded)
            for mine, their in zip(ours2.mems, their_mems, strict=True):
                assert (mine - their.transpose(0, 1)).abs().max() <= TOLERANCE
        # the two-stream pass over the memory too
        perm_mask, target_mapping = factorisation(second["attention_mask"], 2,
                                                   reference.config.attn_type, seed=1)
        g = net(**second, mems=ours.mems, perm_mask=perm_mask, target_mapping=target_mapping)
        their_g, _ = reference_outputs(reference, second, mems=theirs.mems, perm_mask=perm_mask,
                                       target_mapping=target_mapping)
        assert (net.logits(g.last_hidden_state) - their_g).abs().max() <= TOLERANCE


def test_classifier_round_trips_and_pools_the_last_token(tokenizer, tmp_path):
    """transformers pools position -1 (left padding); our encoder pools each row's last token,
    so the right-padded batch the datamodules build scores the same."""
    reference = checkpoint("XLNetForSequenceClassification", CONFIGS[0], tokenizer, tmp_path,
                           num_labels=3)
    right = pair_batch(tokenizer, PAIRS)
    left = left_padded(right)
    assert_classifier_round_trips(XLNET, reference, tmp_path, tokenizer, left, tmp_path)
    _, encoder, _ = from_hf(tmp_path)
    head = XLNET.classification_head(encoder.config, 3, dropout=0.1)
    assert load_head(head, tmp_path, XLNET.hf.classifier_names)
    with torch.no_grad():
        scores = head.eval()(encoder.eval()(**right))
        assert (scores - reference(**left).logits).abs().max() <= TOLERANCE


def test_a_target_that_sees_nothing_gives_no_nan(tokenizer):
    """An all-zero target_mapping row (a padding target) and an all-masked perm row."""
    net = randomize_(XLNetLMHeadModel(XLNetConfig(vocab_size=tokenizer.vocab_size, **CONFIGS[0])))
    batch = pair_batch(tokenizer, PAIRS[:2])
    T = batch["input_ids"].shape[1]
    perm_mask = torch.ones(2, T, T)
    target_mapping = torch.zeros(2, 2, T)
    target_mapping[0, 0, 1] = 1
    with torch.no_grad():
        out = net(**batch, perm_mask=perm_mask, target_mapping=target_mapping)
    assert torch.isfinite(out.last_hidden_state).all()


def test_refuses_what_is_not_implemented():
    with pytest.raises(ValueError, match="bi_data"):
        XLNetConfig(bi_data=True)
    with pytest.raises(ValueError, match="not divisible"):
        XLNetConfig(d_model=30, n_head=4)
