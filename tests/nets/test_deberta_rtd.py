"""DeBERTa-v3's pretraining (He et al. 2023): replaced-token detection with gradient-disentangled
embedding sharing. The RTD loss sends no gradient to the generator's embeddings E_G and some to
the residual E_Δ; the MLM loss the reverse; E_D starts equal to E_G; a tiny pretraining run
lowers both losses and moves E_Δ off zero."""

import pytest
import torch

from datamodules.tokenization import train_tokenizer
from lit_models.archs import get_arch
from lit_models.nets.deberta_rtd import DebertaV3ForPreTraining
from lit_models.nets.deberta_v2 import DebertaV2Config
from lit_models.objectives.rtd import ReplacedTokenDetection
from tests.nets.parity import TEXT


@pytest.fixture(scope="module")
def setup():
    tokenizer = train_tokenizer(get_arch("deberta_v2").tokenizer, TEXT, vocab_size=200,
                                lowercase=False)
    config = DebertaV2Config(
        vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.special.pad, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=64, relative_attention=True, position_buckets=8,
        share_att_key=True, norm_rel_ebd="layer_norm", pos_att_type=["p2c", "c2p"],
        position_biased_input=False, type_vocab_size=0)
    objective = ReplacedTokenDetection()
    collate = objective.collator(tokenizer, seed=0)
    data = [{"input_ids": e.ids} for e in tokenizer.backend.encode_batch(TEXT)]
    return config, objective, collate, data


def tables(net: DebertaV3ForPreTraining):
    return (net.generator.deberta.embeddings.word_embeddings.weight,
            net.deberta.embeddings.word_embeddings.delta)


def test_the_rtd_loss_updates_only_the_residual_and_the_mlm_loss_only_the_generators(setup):
    config, objective, collate, data = setup
    torch.manual_seed(0)
    net = DebertaV3ForPreTraining(config)
    shared, delta = tables(net)
    assert len(net.generator.deberta.encoder.layers) == 1  # half the discriminator's depth
    assert torch.equal(net.deberta.embeddings.word_embeddings.weight, shared)  # E_Δ = 0
    assert not any(p is shared for p in net.deberta.parameters())
    batch = collate(data[:8])
    for loss, moved, still in (("rtd_loss", delta, shared), ("mlm_loss", shared, delta)):
        net.zero_grad(set_to_none=True)
        torch.manual_seed(1)
        objective.losses(net, batch)[loss].backward()
        assert moved.grad is not None and moved.grad.abs().sum() > 0, loss
        assert still.grad is None or not still.grad.any(), loss


def test_a_tiny_pretraining_run_lowers_both_losses(setup):
    config, objective, collate, data = setup
    torch.manual_seed(0)
    net = DebertaV3ForPreTraining(config)
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-3)
    history = []
    for step in range(20):
        losses = objective.losses(net, collate(data[step % 5 * 8:][:8]))
        optimizer.zero_grad()
        sum(losses.values()).backward()
        optimizer.step()
        history.append([losses["mlm_loss"].item(), losses["rtd_loss"].item()])
    first, last = torch.tensor(history[:5]).mean(0), torch.tensor(history[-5:]).mean(0)
    assert (last < 0.9 * first).all(), history
    assert tables(net)[1].abs().sum() > 0  # E_Δ learned a residual


def test_the_export_is_the_discriminator_with_its_effective_embeddings(setup, tmp_path):
    """transformers' DebertaV2Model loads the export with nothing missing and E_D = E_G + E_Δ;
    the net comes back whole (with_heads, the file beside); a discriminator alone starts the
    net with E_G = E_D and E_Δ = 0."""
    import transformers

    from lit_models.archs import Model
    from lit_models.interop.hf import BESIDE_FILE, from_hf, to_hf
    from lit_models.interop.hf_check import check_checkpoint
    from tests.nets.parity import randomize_

    config, _, _, _ = setup
    arch = get_arch("deberta_v2")
    tokenizer = train_tokenizer(arch.tokenizer, TEXT, vocab_size=200, lowercase=False)
    net = randomize_(DebertaV3ForPreTraining(config))
    shared, delta = tables(net)
    to_hf(Model(arch, net, tokenizer), tmp_path / "export")
    theirs, info = transformers.DebertaV2Model.from_pretrained(tmp_path / "export",
                                                               output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert torch.equal(theirs.embeddings.word_embeddings.weight, shared + delta)
    ids = torch.tensor([tokenizer.backend.encode(TEXT[0]).ids])
    with torch.no_grad():
        torch.testing.assert_close(theirs.eval()(ids).last_hidden_state,
                                   net.eval()(ids).last_hidden_state, atol=1e-5, rtol=1e-4)
    check_checkpoint(tmp_path / "export")
    again = from_hf(tmp_path / "export", with_heads=True).net
    assert all(torch.equal(a, b) for a, b in zip(tables(again), (shared, delta), strict=True))
    (tmp_path / "export" / BESIDE_FILE).unlink()
    alone = from_hf(tmp_path / "export", with_heads=True).net
    assert torch.equal(tables(alone)[0], shared + delta) and not tables(alone)[1].any()
