"""Causal LM against its definition: the label of every position is the next token, pads and the
last position predict nothing, and the loss equals transformers' GPT2LMHeadModel loss (which
shifts inside) on the same weights and batch; encoders and encoder-decoders are refused."""

import random

import pytest
import torch

from datamodules.collate import token_mask
from datamodules.errors import PlmbenchError
from datamodules.tokenization import train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.interop.hf import hf_state_dict
from lit_models.nets.bart import BartConfig, BartForConditionalGeneration
from lit_models.nets.gpt import GPTConfig, GPTLMHeadModel
from lit_models.objectives.causal_lm import CausalLM, next_token_labels
from tests.conftest import require
from tests.nets.parity import TEXT, randomize_

IGNORE = -100


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(get_arch("gpt2").tokenizer, TEXT, vocab_size=300, lowercase=False)


def test_labels_are_the_next_tokens():
    ids = torch.tensor([[5, 6, 7, 8], [5, 9, 1, 1]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    assert next_token_labels(ids, mask).tolist() == [[6, 7, 8, IGNORE], [9, IGNORE, IGNORE,
                                                                          IGNORE]]


def test_examples_pack_documents_and_the_loss_is_transformers(tokenizer):
    transformers = require("transformers")
    objective = CausalLM()
    special = tokenizer.special
    documents = [[tokenizer.backend.encode(s, add_special_tokens=False).ids for s in TEXT[i:i + 3]]
                 for i in range(0, 12, 3)]
    examples = objective.make_examples(96, tokenizer)(documents, rng=random.Random(0))
    assert len(examples) > 2 and all(len(e["input_ids"]) <= 96 for e in examples)
    first = examples[0]["input_ids"]
    assert first[0] == special.cls and first[-1] == special.sep
    # every token of the corpus, in order, once: nothing is masked or dropped
    flat = [t for e in examples for t in e["input_ids"] if t not in (special.cls, special.sep)]
    assert flat == [t for d in documents for s in d for t in s]
    batch = objective.collator(tokenizer, 0)([{**e, "mask_seed": 3} for e in examples[:3]])
    assert set(batch) - {"attention_mask"} == {"input_ids", "labels", "label_positions"}
    mask = token_mask(batch).long()  # a batch without padding carries no attention_mask
    config = GPTConfig(vocab_size=tokenizer.vocab_size, n_embd=16, n_layer=2, n_head=2,
                       n_positions=96, pad_token_id=special.pad)
    net = randomize_(GPTLMHeadModel(config))
    reference = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=tokenizer.vocab_size, n_embd=16, n_layer=2, n_head=2, n_positions=96)).eval()
    reference.load_state_dict(hf_state_dict(get_arch("gpt2"), net), strict=False)
    hf_labels = batch["input_ids"].masked_fill(mask == 0, IGNORE)
    with torch.no_grad():
        ours = objective.losses(net, batch)["lm_loss"]
        theirs = reference(input_ids=batch["input_ids"], attention_mask=mask,
                           labels=hf_labels).loss
        value, weight = objective.evaluate(net, batch)["lm_loss"]
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-5)
    assert value.item() == pytest.approx(ours.item())
    assert weight == mask.sum() - 3  # every token but each row's first
    assert objective.summarize({"lm_loss": 2.0})["perplexity"] == pytest.approx(7.389056, abs=1e-5)


def test_non_decoders_are_refused(tokenizer):
    bart = BartForConditionalGeneration(BartConfig(vocab_size=50, d_model=8, encoder_layers=1,
                                                   decoder_layers=1, encoder_attention_heads=1,
                                                   decoder_attention_heads=1, encoder_ffn_dim=8,
                                                   decoder_ffn_dim=8))
    with pytest.raises(PlmbenchError, match="pretrains decoder models .* bart"):
        CausalLM().check(Model(get_arch("bart"), bart, tokenizer))
