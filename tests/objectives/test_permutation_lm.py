"""Permutation LM: the permutation mask and target mapping against their definition (brute force
over every order of a short sequence), the partial-prediction count, the collate's batches, the
query stream's blindness to its target and what follows it in the order, and a tiny run whose
loss falls."""

import itertools
import random

import pytest
import torch

from datamodules.collate import IGNORE_INDEX
from datamodules.errors import PlmbenchError
from datamodules.tokenization import train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.nets.bert import BertConfig, BertForPreTraining
from lit_models.nets.xlnet import XLNetConfig, XLNetLMHeadModel
from lit_models.objectives.permutation_lm import (
    CLS_SEGMENT,
    PermutationLM,
    factorisation,
    num_predict,
    permutation_masks,
)
from tests.nets.parity import TEXT, randomize_

SIZES = dict(d_model=24, n_layer=2, n_head=3, d_inner=40, dropout=0.0)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(get_arch("xlnet").tokenizer, TEXT, vocab_size=120, lowercase=False)


def blocks(tokenizer, texts):
    """Examples as the pretraining datamodule gives them: sentences of token ids."""
    return [{"sentences": [tokenizer.backend.encode(t, add_special_tokens=False).ids]}
            for t in texts]


@pytest.mark.parametrize("length", [1, 2, 4, 5])
def test_masks_match_the_definition_for_every_order(length):
    """i may attend to j iff j comes strictly before i in z; the last ``count`` of z are mapped,
    in z's order; pads (two here) are hidden from every row."""
    T = length + 2
    for order in itertools.permutations(range(length)):
        for count in range(length + 1):
            perm_mask, mapping = permutation_masks(list(order), count, T, max_predict=length)
            for i in range(T):
                for j in range(T):
                    before = j < length and i < length and order.index(j) < order.index(i)
                    may_not = not before if i < length else j >= length
                    assert bool(perm_mask[i, j]) == may_not, (order, i, j)
            expected = torch.zeros(length, T)
            for m, position in enumerate(order[length - count:]):
                expected[m, position] = 1
            assert torch.equal(mapping, expected)


def test_factorisation_puts_the_targets_last():
    rng = random.Random(0)
    for _ in range(50):
        order = factorisation(9, [0, 1, 2, 3, 4, 5, 6], 2, rng)
        assert sorted(order) == list(range(9))
        assert set(order[-2:]) <= set(range(7))  # positions 7, 8 (<sep>, <cls>) never targets


@pytest.mark.parametrize("k", [6, 7, 6.5])
def test_partial_prediction_count(k):
    """max(1, floor(n / K)) of n text tokens; none when fewer than 2 (a target needs context)."""
    assert [num_predict(n, k) for n in (0, 1)] == [0, 0]
    for n in range(2, 200):
        assert num_predict(n, k) == max(1, int(n // k))
        assert n / num_predict(n, k) >= min(k, n)  # at most 1/K of the order is predicted


def test_collated_batch(tokenizer):
    """"text <sep> <cls>" with segments 0 .. 0 2; per row the visible-key counts of the real
    tokens are 0 .. L-1 (a strict order), the targets are the order's last num_predict text
    tokens, mapped in that order, and the labels are their tokens."""
    objective = PermutationLM(partial_prediction_k=6)
    collate = objective.collator(tokenizer, seed=3)
    examples = blocks(tokenizer, TEXT[:4])
    batch = collate(examples)
    special = tokenizer.special
    for row, example in enumerate(examples):
        n = len(example["sentences"][0])
        L = n + 2
        ids = batch["input_ids"][row]
        assert ids[n:L].tolist() == [special.sep, special.cls]
        assert batch["token_type_ids"][row, :L].tolist() == [0] * (n + 1) + [CLS_SEGMENT]
        perm = batch["perm_mask"][row]
        assert perm[:, L:].all()  # pads hidden
        rank = (~perm[:L, :L]).sum(1)  # how many tokens each one sees = its place in z
        assert sorted(rank.tolist()) == list(range(L))
        for i in range(L):  # i sees exactly the tokens ranked before it
            assert torch.equal(~perm[i, :L], rank < rank[i])
        count = num_predict(n, 6)
        targets = batch["target_mapping"][row].argmax(-1)[:count]
        assert rank[targets].tolist() == list(range(L - count, L))
        assert (targets < n).all()
        assert torch.equal(batch["labels"][row, :count], ids[targets])
        assert (batch["labels"][row, count:] == IGNORE_INDEX).all()
        assert (batch["target_mapping"][row, count:] == 0).all()


def test_every_text_token_is_equally_likely_a_target(tokenizer):
    collate = PermutationLM(partial_prediction_k=3).collator(tokenizer, seed=0)
    example = blocks(tokenizer, ["The quick brown fox jumped over the lazy dog."])
    n = len(example[0]["sentences"][0])
    hits = torch.zeros(n + 2)
    draws = 3000
    for _ in range(draws):
        batch = collate(example)
        hits += batch["target_mapping"][0].sum(0)
    assert hits[n:].sum() == 0
    expected = draws * num_predict(n, 3) / n
    assert ((hits[:n] - expected).abs() < 5 * expected ** 0.5).all()


def test_eval_examples_are_masked_the_same_every_time(tokenizer):
    collate = PermutationLM().collator(tokenizer, seed=0)
    examples = [{**e, "mask_seed": 7 + i} for i, e in enumerate(blocks(tokenizer, TEXT[:3]))]
    first, again = collate(examples), collate(examples)
    assert all(torch.equal(first[key], again[key]) for key in first)


def test_query_stream_is_blind_to_its_target_and_what_follows_it(tokenizer):
    """Changing a target's token and every token after it in z leaves its prediction as it was;
    changing a token before it does not."""
    net = randomize_(XLNetLMHeadModel(XLNetConfig(vocab_size=tokenizer.vocab_size, **SIZES)))
    batch = PermutationLM(partial_prediction_k=4).collator(tokenizer, 1)(
        blocks(tokenizer, TEXT[:1]))
    rank = (~batch["perm_mask"][0]).sum(1)
    target = int(batch["target_mapping"][0, 0].argmax())
    later = rank >= rank[target]
    earlier = (rank < rank[target]).nonzero().squeeze(1)[:1]

    def prediction(ids):
        out = net(**{k: v for k, v in batch.items() if k != "labels"} | {"input_ids": ids})
        return net.logits(out.last_hidden_state[0, 0])

    with torch.no_grad():
        reference = prediction(batch["input_ids"])
        changed = batch["input_ids"].clone()
        changed[0, later] = 7
        assert (prediction(changed) - reference).abs().max() < 1e-5
        changed = batch["input_ids"].clone()
        changed[0, earlier] = (changed[0, earlier] + 1) % tokenizer.vocab_size
        assert (prediction(changed) - reference).abs().max() > 1e-3


def test_tiny_pretraining_loss_falls(tokenizer):
    torch.manual_seed(0)
    net = XLNetLMHeadModel(XLNetConfig(vocab_size=tokenizer.vocab_size, **SIZES))
    objective = PermutationLM(partial_prediction_k=4)
    objective.check(Model(get_arch("xlnet"), net, tokenizer))
    collate = objective.collator(tokenizer, seed=0)
    examples = blocks(tokenizer, TEXT[:4])
    eval_batch = collate([{**e, "mask_seed": i} for i, e in enumerate(examples)])
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-3)

    def eval_loss() -> float:
        with torch.no_grad():
            loss, weight = objective.evaluate(net.eval(), eval_batch)["plm_loss"]
        assert weight == (eval_batch["labels"] != IGNORE_INDEX).sum()
        return float(loss)

    before = eval_loss()
    net.train()
    for _ in range(40):
        loss = objective.losses(net, collate(examples))["plm_loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert eval_loss() < before - 0.5  # nats per predicted token, on a fixed eval batch


def test_refuses_nets_without_two_streams(tokenizer):
    with pytest.raises(PlmbenchError, match="two-stream"):
        PermutationLM().check(Model(get_arch("bert"), BertForPreTraining(BertConfig(
            vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=8)), tokenizer))
    with pytest.raises(PlmbenchError, match="partial_prediction_k"):
        PermutationLM(partial_prediction_k=0.5)
