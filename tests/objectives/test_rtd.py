"""ELECTRA's replaced token detection (Clark et al. 2020, §2): the generator's masking, the
discriminator's labels (replaced only where the sample differs), their rates, lambda, no
gradient through sampling, and a loss that falls on a tiny pretraining run."""

import random

import pytest
import torch
from omegaconf import OmegaConf

from bench.run.execute import CONF_DIR
from datamodules.errors import PlmbenchError
from datamodules.tokenization import VOCAB_TXT, train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.nets.bert import BertConfig, BertForPreTraining
from lit_models.nets.electra import ElectraConfig, ElectraForPreTraining
from lit_models.objectives.mlm import IGNORE_INDEX, mask_tokens, masked_lm_loss
from lit_models.objectives.rtd import ReplacedTokenDetection, replace_tokens
from tests.objectives.test_mlm import IDS, N_SPECIAL, padded_batch, special_flags

RTD = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "objective" / "rtd.yaml"))
RTD.pop("_target_")
WORDS = "the a cat dog sat on mat quick brown fox jumped over lazy hello world it was".split()


def objective(**overrides) -> ReplacedTokenDetection:
    return ReplacedTokenDetection(**{**RTD, **overrides})


def test_generator_input_is_85_percent_mask_else_original():
    """The released masking: 15% selected, 85% of them [MASK], the rest unchanged, no random."""
    vocab_size = 30_000
    ids = padded_batch(1000, 128, vocab_size)
    corrupted, labels = mask_tokens(ids, special_flags(vocab_size), objective().masking,
                                    vocab_size, IDS.mask, torch.Generator().manual_seed(0))
    selected = labels != IGNORE_INDEX
    share = selected.sum() / (ids >= N_SPECIAL).sum()
    assert abs(share.item() - 0.15) < 0.002
    masked = (corrupted[selected] == IDS.mask).float().mean().item()
    assert abs(masked - 0.85) < 0.01
    assert torch.equal(corrupted[selected & (corrupted != IDS.mask)],
                       ids[selected & (corrupted != IDS.mask)])


def test_labels_mark_replaced_only_where_the_sample_differs():
    torch.manual_seed(0)
    vocab_size = 40
    ids = padded_batch(400, 64, vocab_size)
    _, labels = mask_tokens(ids, special_flags(vocab_size), objective().masking, vocab_size,
                            IDS.mask)
    selected = labels != IGNORE_INDEX
    n = int(selected.sum())
    # a generator certain of the original token never replaces anything
    certain = torch.full((n, vocab_size), -1e4).scatter(1, labels[selected][:, None], 1e4)
    corrupted, replaced = replace_tokens(ids, labels, certain)
    assert torch.equal(corrupted, ids) and not replaced.any()
    # a uniform generator replaces a selected token with probability 1 - 1/V
    corrupted, replaced = replace_tokens(ids, labels, torch.zeros(n, vocab_size),
                                         torch.Generator().manual_seed(1))
    assert torch.equal(corrupted[~selected], ids[~selected]) and not replaced[~selected].any()
    assert torch.equal(replaced, corrupted != ids)
    rate = replaced[selected].float().mean().item()
    assert abs(rate - (1 - 1 / vocab_size)) < 0.01
    # samples follow p_G: here 3/4 on token 7 and 1/4 on token 9
    logits = torch.full((n, vocab_size), -1e4)
    logits[:, 7], logits[:, 9] = torch.tensor(3.0).log(), 0.0
    corrupted, _ = replace_tokens(ids, labels, logits, torch.Generator().manual_seed(2))
    assert set(corrupted[selected].tolist()) == {7, 9}
    assert abs((corrupted[selected] == 7).float().mean().item() - 0.75) < 0.04


@pytest.fixture(scope="module")
def tokenizer():
    rng = random.Random(0)
    text = [" ".join(rng.choice(WORDS) for _ in range(12)) + "." for _ in range(200)]
    return train_tokenizer(VOCAB_TXT, text, vocab_size=120, lowercase=True)


def tiny_electra(tokenizer, **sizes) -> ElectraForPreTraining:
    torch.manual_seed(0)
    config = ElectraConfig(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.special.pad,
                           embedding_size=16, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=64, generator_size=0.5,
                           max_position_embeddings=64, **sizes)
    return ElectraForPreTraining(config)


def examples(tokenizer, rows: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 20))) for _ in range(rows)]
    return [{"input_ids": e.ids} for e in tokenizer.backend.encode_batch(texts)]


def test_loss_is_generator_mlm_plus_lambda_bce_and_sampling_passes_no_gradient(tokenizer):
    net = tiny_electra(tokenizer).eval()  # no dropout: two passes see the same network
    rtd = objective(rtd_weight=50.0)
    rtd.check(Model(get_arch("electra"), net, tokenizer))
    batch = rtd.collator(tokenizer, seed=0)(examples(tokenizer, 16, 0))
    assert (batch["attention_mask"] == 0).any()
    torch.manual_seed(3)
    losses = rtd.losses(net, batch)
    torch.manual_seed(3)
    terms = rtd._forward(net, batch)
    assert torch.allclose(losses["rtd_loss"], 50.0 * terms["disc_loss"])
    hidden = net.generator(batch["input_ids"], batch["attention_mask"]).last_hidden_state
    expected = masked_lm_loss(hidden, batch["labels"], net.generator.mlm_head)
    assert torch.allclose(losses["mlm_loss"], expected)
    # the generator's encoder learns from L_MLM alone: L_Disc reaches it through no sample
    sum(losses.values()).backward()
    layer = net.generator.electra.encoder.layers[0].feed_forward.linear1.weight
    total_grad = layer.grad.clone()
    discriminator = net.electra.encoder.layers[0].feed_forward.linear1.weight
    assert discriminator.grad.abs().sum() > 0
    net.zero_grad()
    torch.manual_seed(3)
    rtd.losses(net, batch)["mlm_loss"].backward()
    assert torch.allclose(total_grad, layer.grad)
    assert discriminator.grad is None  # ... which alone trains the discriminator


def test_eval_reports_rates_and_is_repeatable(tokenizer):
    net = tiny_electra(tokenizer).eval()
    rtd = objective()
    rtd.check(Model(get_arch("electra"), net, tokenizer))
    batch = rtd.collator(tokenizer, seed=0)(examples(tokenizer, 32, 1))
    first, second = rtd.evaluate(net, batch), rtd.evaluate(net, batch)
    assert set(first) == set(rtd.eval_metrics)
    assert all(torch.equal(first[k][0], second[k][0]) for k in first)
    selected_share = (batch["labels"] != IGNORE_INDEX).sum() / batch["attention_mask"].sum()
    # an untrained generator rarely samples the original: most selected tokens are replaced
    assert 0.5 * selected_share < first["replaced_rate"][0] <= selected_share
    assert first["replaced_rate"][1] == batch["attention_mask"].sum()
    assert rtd.flops(type(rtd.generator_shape).of(net.config), batch) > 0


def test_only_electra_nets_train_with_it(tokenizer):
    bert = BertForPreTraining(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=8,
                                         num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=8))
    with pytest.raises(PlmbenchError, match="model=electra"):
        objective().check(Model(get_arch("bert"), bert, tokenizer))
    with pytest.raises(PlmbenchError, match="rtd_weight"):
        objective(rtd_weight=-1)


def test_tiny_pretraining_run_lowers_both_losses(tokenizer):
    net = tiny_electra(tokenizer).train()
    rtd = objective()
    rtd.check(Model(get_arch("electra"), net, tokenizer))
    collate = rtd.collator(tokenizer, seed=0)
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-3)
    history = []
    for step in range(40):
        losses = rtd.losses(net, collate(examples(tokenizer, 16, step)))
        optimizer.zero_grad()
        sum(losses.values()).backward()
        optimizer.step()
        history.append([losses["mlm_loss"].item(), losses["rtd_loss"].item() / 50])
    start, end = torch.tensor(history[:5]).mean(0), torch.tensor(history[-5:]).mean(0)
    assert (end < 0.8 * start).all(), (start, end)
