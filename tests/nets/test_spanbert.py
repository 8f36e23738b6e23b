"""SpanBERT against transformers: SpanBERT's checkpoints are transformers ``bert`` checkpoints, so
a random BertForMaskedLM imported as SpanBERT gives the same ``last_hidden_state`` and masked-LM
logits to 1e-5 in float32 on padded batches; our pretraining net exports as a BertForMaskedLM
that transformers loads equal, and reads back with its span boundary head."""

import torch

from lit_models.archs import Model, get_arch
from lit_models.core.build import build_net
from lit_models.interop.hf import from_hf, to_hf
from lit_models.nets.spanbert import SpanBertConfig, SpanBertForPreTraining, SpanBertModel
from tests.conftest import require
from tests.nets.parity import TEXT, max_diff, randomize_, segments

transformers = require("transformers")

TOLERANCE = 1e-5
SPANBERT = get_arch("spanbert")
SIZES = dict(hidden_size=30, num_hidden_layers=3, num_attention_heads=5, intermediate_size=46,
             max_position_embeddings=71, hidden_act="gelu")
PAIRS = [(TEXT[0], TEXT[1]), (TEXT[2], "Birds sing."), ("Dogs jump.", TEXT[3])]


def test_bert_checkpoint_imports_as_spanbert(tmp_path):
    from datamodules.init_from import InitFrom
    from datamodules.tokenization import save_tokenizer, train_tokenizer

    tokenizer = train_tokenizer(SPANBERT.tokenizer, TEXT, vocab_size=300, lowercase=False)
    config = transformers.BertConfig(vocab_size=tokenizer.vocab_size, **SIZES)
    reference = randomize_(transformers.BertForMaskedLM(config))
    reference.save_pretrained(tmp_path / "hf")
    save_tokenizer(tokenizer, tmp_path / "hf", SIZES["max_position_embeddings"])
    preset = {"name": "spanbert-test", "arch": "spanbert"}
    checkpoint = InitFrom("hf", str(tmp_path / "hf"))
    net = build_net(SPANBERT, preset, checkpoint, True, lambda: None).net
    assert isinstance(net, SpanBertForPreTraining)
    encoder = build_net(SPANBERT, preset, checkpoint, False, lambda: None).net
    assert isinstance(encoder, SpanBertModel)
    inputs = segments(tokenizer, PAIRS)
    with torch.no_grad():
        theirs = reference.eval()(**inputs, output_hidden_states=True)
        hidden = encoder.eval()(**inputs).last_hidden_state
        assert max_diff(hidden, theirs.hidden_states[-1], inputs["attention_mask"]) <= TOLERANCE
        logits = net.mlm_head(net.eval()(**inputs).last_hidden_state)
        assert max_diff(logits, theirs.logits, inputs["attention_mask"]) <= TOLERANCE

        # the pretraining net exports as BertForMaskedLM, its SBO head beside it (cls.sbo.)
        ours = randomize_(SpanBertForPreTraining(SpanBertConfig(
            vocab_size=tokenizer.vocab_size, span_positions=7, **SIZES)))
        to_hf(Model(SPANBERT, ours, tokenizer), tmp_path / "export")
        again = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "export").eval()
        assert type(again).__name__ == "BertForMaskedLM"
        logits = ours.mlm_head(ours(**inputs).last_hidden_state)
        assert max_diff(logits, again(**inputs).logits, inputs["attention_mask"]) <= TOLERANCE
        _, restored, _ = from_hf(tmp_path / "export", with_heads=True, arch=SPANBERT)
        assert isinstance(restored, SpanBertForPreTraining)
        state = restored.state_dict()
        assert all(torch.equal(v, state[k]) for k, v in ours.state_dict().items())
