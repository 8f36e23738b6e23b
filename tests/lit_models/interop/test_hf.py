"""Hugging Face interop: transformers checkpoints -> ``from_hf`` (old-style files, errors,
fine-tuned encoders), our nets -> ``to_hf`` -> transformers, and the real all-MiniLM-L6-v2
weights; outputs agree to 1e-5 in float32 on padded batches of real tokenized sentences (non-pad
positions). Every architecture's checkpoints of each transformers class, imported and compared:
``tests/nets/test_parity.py``."""

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from datamodules.collate import pad_collate
from datamodules.errors import PlmbenchError
from datamodules.tokenization import VOCAB_TXT, TextTokenizer, load_tokenizer, save_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.interop.hf import from_hf, to_hf
from lit_models.nets.bert import BertConfig, BertForPreTraining, BertModel
from tests.conftest import require
from tests.nets.parity import randomize_

transformers = require("transformers")
BERT_ARCH = get_arch("bert")

TOLERANCE = 1e-5
#: a toy uncased WordPiece vocabulary: words, continuation pieces and punctuation
WORDS = "the a cat dog sat on mat quick brown fox jump over lazy hello world it was and play"
PIECES = "##s ##ed ##ing . , !"
SPECIAL_TOKENS = [token for _, token in VOCAB_TXT.tokens]
VOCAB = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *WORDS.split(), *PIECES.split()])}
SENTENCES = [
    "The quick brown fox jumped over the lazy dog.",
    "Hello, world!",
    "A cat sat on the mat and it was playing.",
    "Dogs jump",
]
PAIR = ("The cat sat on the mat.", "It was a lazy dog, playing!")
TINY = dict(
    vocab_size=len(VOCAB),
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=48,
    hidden_act="gelu_new",
)


@pytest.fixture
def tokenizer(tmp_path_factory) -> TextTokenizer:
    """BERT's tokenizer over the toy vocabulary, as a checkpoint's vocab.txt gives it."""
    directory = tmp_path_factory.mktemp("vocab")
    (directory / "vocab.txt").write_text("".join(f"{token}\n" for token in VOCAB))
    return load_tokenizer(directory)


def encode(tokenizer: TextTokenizer, sentences: list[str]) -> dict[str, torch.Tensor]:
    """A dynamically padded batch, as the datamodules build it."""
    encodings = tokenizer.backend.encode_batch(sentences)
    examples = [{"input_ids": e.ids, "token_type_ids": e.type_ids} for e in encodings]
    return pad_collate(examples, pad_id=tokenizer.special.pad)


def hf_checkpoint(cls_name: str, directory: Path, tokenizer: TextTokenizer) -> torch.nn.Module:
    """A random transformers model saved with ``save_pretrained`` plus our tokenizer files."""
    model = randomize_(getattr(transformers, cls_name)(transformers.BertConfig(**TINY)))
    model.save_pretrained(directory)
    save_tokenizer(tokenizer, directory)
    return model


def assert_close(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor | None = None) -> None:
    if mask is not None:
        a, b = a[mask.bool()], b[mask.bool()]
    assert a.shape == b.shape
    assert (a - b).abs().max().item() <= TOLERANCE


def test_from_hf_reads_torch_bin_tf_names_tied_copies_and_vocab_txt(
    tmp_path: Path, tokenizer: TextTokenizer
):
    """An old-style checkpoint: pytorch_model.bin holding the tied decoder copies, a
    position_ids buffer and TF-converted LayerNorm names (gamma/beta); a cased vocab.txt only."""
    hf = randomize_(transformers.BertForPreTraining(transformers.BertConfig(**TINY)))
    tf_names = {"LayerNorm.weight": "LayerNorm.gamma", "LayerNorm.bias": "LayerNorm.beta"}
    state = {
        re.sub("|".join(tf_names), lambda m: tf_names[m[0]], k): t
        for k, t in hf.state_dict().items()
    }
    assert "bert.embeddings.LayerNorm.gamma" in state
    assert "cls.predictions.decoder.weight" in state
    state["bert.embeddings.position_ids"] = torch.arange(hf.config.max_position_embeddings)[None]
    torch.save(state, tmp_path / "pytorch_model.bin")
    hf.config.to_json_file(tmp_path / "config.json")
    (tmp_path / "vocab.txt").write_text("".join(f"{token}\n" for token in VOCAB))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))

    _, net, cased = from_hf(tmp_path, with_heads=True)
    batch = encode(tokenizer, SENTENCES)
    with torch.no_grad():
        theirs = hf(**batch)
        out = net.eval()(**batch)
        mlm = net.mlm_head(out.last_hidden_state)
        assert_close(mlm, theirs.prediction_logits, batch["attention_mask"])
        assert_close(net.nsp_head(out.pooler_output), theirs.seq_relationship_logits)
    ids = [VOCAB[t] for t in ("[CLS]", "[UNK]", "world", "[SEP]")]
    assert cased.backend.encode("Hello world").ids == ids  # "Hello" is not lowercased


def test_to_hf_loads_in_transformers(tmp_path: Path, tokenizer: TextTokenizer):
    ours = randomize_(BertForPreTraining(BertConfig(**TINY)))
    path = to_hf(Model(BERT_ARCH, ours, tokenizer), tmp_path / "export")
    hf = transformers.BertForPreTraining.from_pretrained(path).eval()
    auto = transformers.AutoModel.from_pretrained(path).eval()
    assert type(auto) is transformers.BertModel
    batch = encode(tokenizer, SENTENCES)
    mask = batch["attention_mask"]
    with torch.no_grad():
        out = ours(**batch)
        theirs = hf(**batch)
        theirs_auto = auto(**batch)
        assert_close(ours.mlm_head(out.last_hidden_state), theirs.prediction_logits, mask)
        assert_close(ours.nsp_head(out.pooler_output), theirs.seq_relationship_logits)
        assert_close(out.last_hidden_state, theirs_auto.last_hidden_state, mask)
        assert_close(out.pooler_output, theirs_auto.pooler_output)

    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    expected = tokenizer.backend.encode(*PAIR)
    encoded = hf_tokenizer(*PAIR)
    assert encoded["input_ids"] == expected.ids and VOCAB["[UNK]"] not in expected.ids
    assert encoded["token_type_ids"] == expected.type_ids and 1 in expected.type_ids

    _, back, _ = from_hf(path, with_heads=True)
    for (name, a), (_, b) in zip(ours.state_dict().items(), back.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_to_hf_encoder_without_pooler(tmp_path: Path, tokenizer: TextTokenizer):
    ours = randomize_(BertModel(BertConfig(**TINY), add_pooling_layer=False))
    export = to_hf(Model(BERT_ARCH, ours, tokenizer), tmp_path / "e")
    auto = transformers.AutoModel.from_pretrained(export).eval()
    batch = encode(tokenizer, SENTENCES)
    with torch.no_grad():
        assert_close(
            ours(**batch).last_hidden_state,
            auto(**batch).last_hidden_state,
            batch["attention_mask"],
        )


def test_all_minilm_l6_v2_matches_transformers(minilm_path: Path):
    _, net, tokenizer = from_hf(minilm_path)
    hf = transformers.AutoModel.from_pretrained(minilm_path).eval()
    sentences = [
        "A man is playing a guitar.",
        "Someone plays the guitar on stage tonight.",
        "The stock market fell sharply on Tuesday after the report.",
    ]
    batch = encode(tokenizer, sentences)
    assert len(set(batch["attention_mask"].sum(1).tolist())) == 3  # really mixed lengths
    hf_ids = transformers.AutoTokenizer.from_pretrained(minilm_path)(sentences)["input_ids"]
    assert [e.ids for e in tokenizer.backend.encode_batch(sentences)] == hf_ids
    mask = batch["attention_mask"]
    with torch.no_grad():
        out = net.eval()(**batch)
        theirs = hf(**batch)
    assert_close(out.last_hidden_state, theirs.last_hidden_state, mask)
    assert_close(out.pooler_output, theirs.pooler_output)
    # the real weights behave like a sentence encoder: mean pooling ranks the paraphrase first
    pooled = (out.last_hidden_state * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    pooled = torch.nn.functional.normalize(pooled, dim=-1)
    assert pooled[0] @ pooled[1] > pooled[0] @ pooled[2] + 0.2


def test_to_hf_replaces_atomically(tmp_path: Path, tokenizer: TextTokenizer):
    first = to_hf(Model(BERT_ARCH, BertModel(BertConfig(**TINY)), tokenizer), tmp_path / "export")
    second_net = randomize_(BertModel(BertConfig(**TINY)))
    to_hf(Model(BERT_ARCH, second_net, tokenizer), first)
    assert [p.name for p in tmp_path.iterdir()] == ["export"]  # no temp dirs left behind
    assert torch.equal(
        load_file(first / "model.safetensors")["pooler.dense.bias"], second_net.pooler.bias.detach()
    )
    pre_norm = BertModel(BertConfig(**TINY, pre_norm=True))
    with pytest.raises(PlmbenchError, match="pre_norm"):
        to_hf(Model(BERT_ARCH, pre_norm, tokenizer), first)
    assert [p.name for p in tmp_path.iterdir()] == ["export"]
    from_hf(first)  # the previous export is intact


def test_from_hf_errors_name_the_problem(tmp_path: Path, tokenizer: TextTokenizer):
    everything = ("config.json, model.safetensors or model.safetensors.index.json or "
                  "pytorch_model.bin or pytorch_model.bin.index.json, tokenizer.json or "
                  "vocab.txt or vocab.json or spiece.model or spm.model")
    with pytest.raises(PlmbenchError, match=f"nowhere is not .* it lacks {everything};"):
        from_hf(tmp_path / "nowhere")
    hf_checkpoint("BertModel", tmp_path, tokenizer)
    for name in ("tokenizer.json", "vocab.txt"):
        (tmp_path / name).rename(tmp_path / f"{name}.bak")
    with pytest.raises(PlmbenchError, match="lacks tokenizer.json or vocab.txt or vocab.json or "
                       "spiece.model or spm.model;"):
        from_hf(tmp_path)
    for name in ("tokenizer.json", "vocab.txt"):
        (tmp_path / f"{name}.bak").rename(tmp_path / name)
    weights = tmp_path / "model.safetensors"
    state = load_file(weights)

    save_file({**state, "encoder.extra.weight": torch.zeros(2, 32)}, weights)
    with pytest.raises(PlmbenchError, match=r"unknown weights \['encoder\.extra\.weight'\]"):
        from_hf(tmp_path)
    dropped = "encoder.layer.1.attention.self.key.bias"
    save_file({k: v for k, v in state.items() if k != dropped}, weights)
    with pytest.raises(PlmbenchError, match=rf"lacks weights \['{dropped}'\]"):
        from_hf(tmp_path)
    save_file(state, weights)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "vocab_size": 50}))
    with pytest.raises(PlmbenchError, match=r"embeddings\.word_embeddings\.weight of shape"):
        from_hf(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "gpt_neo"}))
    with pytest.raises(PlmbenchError, match="model_type 'gpt_neo'; plmbench imports"):
        from_hf(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    assert type(from_hf(tmp_path).net).__name__ == "RobertaModel"  # model_type picks the net
    (tmp_path / "config.json").write_text(json.dumps(config))
    weights.write_bytes(b"not a safetensors file")
    with pytest.raises(PlmbenchError, match="cannot read .*model.safetensors"):
        from_hf(tmp_path)


@pytest.mark.parametrize(
    ("cls_name", "overrides"),
    [
        ("BertForSequenceClassification", dict(hidden_act="relu", num_attention_heads=1)),
        ("BertForTokenClassification", dict(hidden_act="gelu_pytorch_tanh", type_vocab_size=3)),
        ("BertForQuestionAnswering", dict(hidden_act="silu", intermediate_size=20,
                                          layer_norm_eps=1e-5, num_hidden_layers=3)),
    ],
)
def test_from_hf_loads_the_encoder_of_fine_tuned_checkpoints(
    tmp_path: Path, tokenizer: TextTokenizer, cls_name: str, overrides: dict
):
    """Task heads (classifier.*, qa_outputs.*) are skipped; the encoder still matches, also for
    activations that transformers names differently and configs unlike the other tests'."""
    config = transformers.BertConfig(**{**TINY, **overrides})
    hf = randomize_(getattr(transformers, cls_name)(config))
    hf.save_pretrained(tmp_path)
    save_tokenizer(tokenizer, tmp_path)
    batch = encode(tokenizer, SENTENCES)
    _, encoder, _ = from_hf(tmp_path)
    with torch.no_grad():
        theirs = hf.bert(**batch).last_hidden_state
        ours = encoder.eval()(**batch).last_hidden_state
    assert_close(ours, theirs, batch["attention_mask"])
