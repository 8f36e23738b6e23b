"""``from_hf`` on checkpoint directories laid out as the published ones, written here at tiny size:
GPT-2's (a byte-level BPE tokenizer.json, no pad token anywhere), T5's and ALBERT's
SentencePiece-only directories (``spiece.model``, no tokenizer.json) and BART's vocab.json +
merges.txt. Each tokenizes as transformers does on the same directory (its own loaders are the
oracle), the SentencePiece ones segment as the ``sentencepiece`` library itself does, and the
weights load; GPT-2 pads with its end-of-text token under the attention mask, as transformers
does, without changing any unpadded position.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, decoders, pre_tokenizers, processors, trainers
from tokenizers.models import BPE

from datamodules.collate import pad_collate
from lit_models.archs import get_arch
from lit_models.core.build import net_config
from lit_models.interop.hf import from_hf, hf_checkpoint
from lit_models.interop.hf_check import check_checkpoint
from tests.conftest import REPO, require, tiny_preset_name

spm = require("sentencepiece")
transformers = require("transformers")

WORDS = ("the quick brown fox jumps over a lazy dog while Café naïve résumé Straße 1,000 2,5 "
         "tokens pieces HELLO world sentence model ｆｕｌｌ ｗｉｄｔｈ").split()
CORPUS = [" ".join(random.Random(i).choices(WORDS, k=9)) for i in range(600)]
TEXTS = ["The quick brown fox.", "  Café   naïve résumé  ", "HELLO world, 1,000 tokens",
         "ｆｕｌｌ ｗｉｄｔｈ Straße", "``quoted'' sentence", "a"]


def write_checkpoint(directory: Path, arch_name: str, vocab_size: int, **ids) -> torch.nn.Module:
    """A random tiny net of ``arch_name`` in transformers' layout (config.json + weights), its
    config's special ids as given (a key set to None is left out, as GPT-2 leaves pad out)."""
    from omegaconf import OmegaConf

    arch = get_arch(arch_name)
    path = REPO / "conf/model" / f"{tiny_preset_name(arch_name)}.yaml"
    preset = OmegaConf.to_container(OmegaConf.load(path))
    pad = ids.get("pad_token_id")
    config = net_config(arch, preset, vocab_size, pad if pad is not None else 0)
    for key, value in ids.items():
        if value is not None and hasattr(config, key):
            setattr(config, key, value)
    torch.manual_seed(0)
    net = arch.encoder(config).eval()
    hf_config, weights = hf_checkpoint(arch, net)
    hf_config.update({k: v for k, v in ids.items() if v is not None})
    for key in [k for k, v in ids.items() if v is None]:
        hf_config.pop(key, None)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(hf_config))
    save_file(weights, directory / "model.safetensors", metadata={"format": "pt"})
    return net


def train_spm(path: Path, **options) -> spm.SentencePieceProcessor:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_writer=model,
                                   vocab_size=80, model_type="unigram", hard_vocab_limit=False,
                                   minloglevel=3, **options)
    path.write_bytes(model.getvalue())
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def byte_level_bpe(specials_first: list[str], specials_last: list[str]) -> Tokenizer:
    backend = Tokenizer(BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials_first,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    backend.train_from_iterator(CORPUS, trainer)
    backend.add_special_tokens(specials_last)
    return backend


def hf_ids(directory: Path, *texts: str) -> list[int]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(directory))
    return tokenizer(*texts)["input_ids"]


def our_ids(tokenizer, *texts: str) -> list[int]:
    return tokenizer.backend.encode(*texts).ids


# ------------------------------------------------------------------------------------- GPT-2


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> Path:
    """As the published gpt2: tokenizer.json (ByteLevel post-processor, no template),
    vocab.json + merges.txt, a tokenizer_config.json naming no token, <|endoftext|> last and
    named by config.json's bos/eos ids only."""
    directory = tmp_path_factory.mktemp("gpt2")
    backend = byte_level_bpe([], ["<|endoftext|>"])
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    backend.save(str(directory / "tokenizer.json"))
    backend.model.save(str(directory))
    (directory / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 1024}))
    end = backend.token_to_id("<|endoftext|>")
    write_checkpoint(directory, "gpt2", backend.get_vocab_size(), bos_token_id=end,
                     eos_token_id=end, pad_token_id=None)
    return directory


def test_gpt2_as_published_loads_and_pads_with_its_end_of_text_token(gpt2_dir):
    _, net, tokenizer = from_hf(gpt2_dir)
    net.eval()
    end = tokenizer.backend.token_to_id("<|endoftext|>")
    assert tokenizer.special.pad == tokenizer.special.sep == tokenizer.special.cls == end
    assert net.config.pad_token_id == end
    for text in TEXTS:
        assert our_ids(tokenizer, text) == hf_ids(gpt2_dir, text)
    # a batch of two lengths, padded with <|endoftext|> under the attention mask: each row's
    # real positions are what the text alone gives, and what transformers' GPT2Model gives
    rows = [{"input_ids": our_ids(tokenizer, text)} for text in (TEXTS[0], TEXTS[2])]
    batch = pad_collate(rows, tokenizer.special.pad)
    assert (batch["input_ids"][batch["attention_mask"] == 0] == end).all()
    theirs = transformers.GPT2Model.from_pretrained(str(gpt2_dir)).eval()
    with torch.no_grad():
        padded = net(**batch).last_hidden_state
        reference = theirs(**batch).last_hidden_state
        for i, row in enumerate(rows):
            n = len(row["input_ids"])
            alone = net(input_ids=torch.tensor([row["input_ids"]])).last_hidden_state[0]
            torch.testing.assert_close(padded[i, :n], alone, atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(padded[i, :n], reference[i, :n], atol=1e-4, rtol=1e-4)


# ------------------------------------------------------------------------------- T5, ALBERT


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory) -> tuple[Path, spm.SentencePieceProcessor]:
    """As the published google-t5/t5-small: spiece.model (pad 0, </s> 1, <unk> 2) and the model;
    the 100 sentinels are no pieces: transformers numbers them after the vocabulary,
    <extra_id_0> last."""
    directory = tmp_path_factory.mktemp("t5")
    sp = train_spm(directory / "spiece.model", pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    write_checkpoint(directory, "t5", sp.get_piece_size() + 100, pad_token_id=0,
                     eos_token_id=1, decoder_start_token_id=0)
    return directory, sp


def test_t5_from_its_sentencepiece_model_alone(t5_dir):
    directory, sp = t5_dir
    _, net, tokenizer = from_hf(directory)
    pieces = sp.get_piece_size()
    assert tokenizer.vocab_size == net.config.vocab_size == pieces + 100
    assert tokenizer.backend.token_to_id("<extra_id_0>") == pieces + 99
    assert tokenizer.backend.token_to_id("<extra_id_99>") == pieces
    assert (tokenizer.special.pad, tokenizer.special.sep, tokenizer.special.unk) == (0, 1, 2)
    for text in TEXTS:
        # SentencePiece's own segmentation, then T5's "</s>"
        assert our_ids(tokenizer, text) == [*sp.encode(text), 1]
        assert our_ids(tokenizer, text) == hf_ids(directory, text)
    span = "The <extra_id_0> fox <extra_id_1>."
    assert our_ids(tokenizer, span) == hf_ids(directory, span)
    assert our_ids(tokenizer, TEXTS[0], TEXTS[1]) == hf_ids(directory, TEXTS[0], TEXTS[1])


@pytest.fixture(scope="module")
def albert_dir(tmp_path_factory) -> tuple[Path, spm.SentencePieceProcessor]:
    """As the published albert-base-v2: spiece.model with <pad>=0 <unk>=1 and [CLS]=2 [SEP]=3
    [MASK]=4 as its own symbols, config.json naming bos [CLS] / eos [SEP] by id."""
    directory = tmp_path_factory.mktemp("albert")
    sp = train_spm(directory / "spiece.model", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                   control_symbols=["[CLS]", "[SEP]"], user_defined_symbols=["[MASK]"])
    write_checkpoint(directory, "albert", sp.get_piece_size(), pad_token_id=0, bos_token_id=2,
                     eos_token_id=3)
    return directory, sp


def test_albert_from_its_sentencepiece_model_alone(albert_dir):
    directory, sp = albert_dir
    _, net, tokenizer = from_hf(directory)
    assert tokenizer.vocab_size == sp.get_piece_size() == net.config.vocab_size
    special = tokenizer.special
    assert (special.pad, special.unk, special.cls, special.sep, special.mask) == (0, 1, 2, 3, 4)
    theirs = transformers.AutoTokenizer.from_pretrained(str(directory))
    for text in TEXTS:
        ours = tokenizer.backend.encode(text)
        assert ours.ids == theirs(text)["input_ids"]
        # AlbertTokenizer's preprocess_text (lowercased, accents stripped, `` and '' as "), then
        # SentencePiece's own segmentation between [CLS] and [SEP]
        import unicodedata

        clean = " ".join(text.split()).replace("``", '"').replace("''", '"')
        clean = "".join(c for c in unicodedata.normalize("NFKD", clean)
                        if not unicodedata.combining(c)).lower()
        assert ours.ids == [2, *sp.encode(clean), 3]
    pair = tokenizer.backend.encode(TEXTS[0], "Hello [MASK] world")
    expected = theirs(TEXTS[0], "Hello [MASK] world", return_token_type_ids=True)
    assert pair.ids == expected["input_ids"] and pair.type_ids == expected["token_type_ids"]
    assert 4 in pair.ids


# -------------------------------------------------------------------------------------- BART


@pytest.fixture(scope="module")
def bart_dir(tmp_path_factory) -> Path:
    """As the published facebook/bart-base once was: vocab.json + merges.txt in fairseq's order
    (<s>=0 <pad>=1 </s>=2 <unk>=3, <mask> last), config.json, no tokenizer.json."""
    directory = tmp_path_factory.mktemp("bart")
    trained = json.loads(byte_level_bpe(["<s>", "<pad>", "</s>", "<unk>"], []).to_str())["model"]
    vocab = {**trained["vocab"], "<mask>": len(trained["vocab"])}
    BPE(vocab, [tuple(merge) for merge in trained["merges"]]).save(str(directory))
    write_checkpoint(directory, "bart", len(vocab), pad_token_id=1,
                     bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    return directory


def test_bart_from_vocab_json_and_merges_alone(bart_dir):
    _, net, tokenizer = from_hf(bart_dir)
    special = tokenizer.special
    assert (special.cls, special.pad, special.sep, special.unk) == (0, 1, 2, 3)
    assert special.mask == tokenizer.vocab_size - 1 == net.config.vocab_size - 1
    for text in TEXTS:
        assert our_ids(tokenizer, text) == hf_ids(bart_dir, text)
    assert our_ids(tokenizer, TEXTS[1], TEXTS[0]) == hf_ids(bart_dir, TEXTS[1], TEXTS[0])
    # <mask> takes the space before it, as BART's and RoBERTa's mask token does (lstrip); the
    # tokenizer transformers 5 builds from these two files alone leaves a lone "Ġ" instead
    masked = tokenizer.backend.encode("Hello <mask> world")
    assert masked.ids[masked.tokens.index(" <mask>")] == special.mask
    assert "Ġ" not in masked.tokens


# -------------------------------------------------------------------------------- DeBERTa-v3


@pytest.fixture(scope="module")
def deberta_v3_dir(tmp_path_factory) -> tuple[Path, spm.SentencePieceProcessor, dict]:
    """As the published microsoft/deberta-v3-*: spm.model ([PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3;
    [MASK] numbered after the pieces, no tokenizer.json) and the weights as an fp16 pickle
    (``pytorch_model.bin``, as released): the discriminator under ``deberta.``, its RTD head
    (``mask_predictions``) and a masked-LM head (``lm_predictions``); the fp16 tensors are
    returned."""
    from tests.hub_cache import DEBERTA_V3_SPM

    directory = tmp_path_factory.mktemp("deberta-v3")
    sp = train_spm(directory / "spm.model", **DEBERTA_V3_SPM)
    write_checkpoint(directory, "deberta_v2", sp.get_piece_size() + 1, pad_token_id=0)
    encoder = load_file(directory / "model.safetensors")
    H, V = encoder["embeddings.LayerNorm.weight"].shape[0], sp.get_piece_size() + 1
    generator = torch.Generator().manual_seed(0)
    heads = {f"{head}.{name}": torch.randn(*shape, generator=generator)
             for head, names in (("mask_predictions", {"dense.weight": (H, H), "dense.bias": (H,),
                                                       "LayerNorm.weight": (H,),
                                                       "LayerNorm.bias": (H,),
                                                       "classifier.weight": (1, H),
                                                       "classifier.bias": (1,)}),
                                 ("lm_predictions.lm_head", {"dense.weight": (H, H),
                                                             "dense.bias": (H,),
                                                             "LayerNorm.weight": (H,),
                                                             "LayerNorm.bias": (H,),
                                                             "bias": (V,)}))
             for name, shape in names.items()}
    weights = {**{f"deberta.{k}": v.half() for k, v in encoder.items()},
               **{k: v.half() for k, v in heads.items()}}
    torch.save(weights, directory / "pytorch_model.bin")
    (directory / "model.safetensors").unlink()
    return directory, sp, weights


def test_deberta_v3_from_its_spm_model_and_fp16_pickle(deberta_v3_dir):
    directory, sp, weights = deberta_v3_dir
    _, net, tokenizer = from_hf(directory)
    pieces = sp.get_piece_size()
    special = tokenizer.special
    assert (special.pad, special.cls, special.sep, special.unk) == (0, 1, 2, 3)
    assert special.mask == pieces == tokenizer.vocab_size - 1 == net.config.vocab_size - 1
    theirs = transformers.AutoTokenizer.from_pretrained(str(directory))
    assert type(theirs).__name__ == "DebertaV2Tokenizer"
    for text in TEXTS:
        # SentencePiece's own segmentation between [CLS] and [SEP], as the released DeBERTa
        # tokenizer (sentencepiece itself) gives it
        assert our_ids(tokenizer, text) == [1, *sp.encode(text), 2]
    # transformers 5's DebertaV2Tokenizer normalises with NFC, not the model's NFKC character
    # map: the same ids where the two agree (not on full-width letters)
    agree = [t for t in TEXTS if "ｆ" not in t]
    assert hf_ids(directory, TEXTS[3]) != our_ids(tokenizer, TEXTS[3])
    for text in [*agree, "Hello [MASK] world."]:
        assert our_ids(tokenizer, text) == hf_ids(directory, text)
    pair = tokenizer.backend.encode(TEXTS[0], "Hello [MASK] world")
    expected = theirs(TEXTS[0], "Hello [MASK] world", return_token_type_ids=True)
    assert pair.ids == expected["input_ids"] and pair.type_ids == expected["token_type_ids"]
    assert special.mask in pair.ids
    # the fp16 pickle loads into float32 parameters, value for value
    assert all(p.dtype == torch.float32 for p in net.parameters())
    word = net.embeddings.word_embeddings.weight
    assert torch.equal(word, weights["deberta.embeddings.word_embeddings.weight"].float())
    check_checkpoint(directory)  # every weight has a place, or is a head no net reads
    # the pretraining net starts from it: E_G = E_D, E_Δ = 0, the released RTD head
    pretraining = from_hf(directory, with_heads=True).net
    assert torch.equal(pretraining.generator.deberta.embeddings.word_embeddings.weight, word)
    assert not pretraining.deberta.embeddings.word_embeddings.delta.any()
    assert torch.equal(pretraining.rtd_head.classifier.weight,
                       weights["mask_predictions.classifier.weight"].float())
    reference = transformers.AutoModel.from_pretrained(str(directory), dtype=torch.float32)
    ids = torch.tensor([pair.ids])
    with torch.no_grad():
        ours = net.eval()(ids).last_hidden_state
        expected_states = reference.eval()(ids).last_hidden_state
    torch.testing.assert_close(ours, expected_states, atol=1e-5, rtol=1e-4)


def test_deberta_v3_as_released_fine_tunes_end_to_end(deberta_v3_dir, mirror, tmp_path):
    """``plmbench run init_from=hf:<dir>`` on the released layout (spm.model, fp16 pickle):
    RTE trains a step and leaves an ok record of the DeBERTa-v2 architecture."""
    from tests.bench.invoke import plmbench, read, records_under

    directory, _, _ = deberta_v3_dir
    results = tmp_path / "results"
    result = plmbench("run", "model=deberta-v3-tiny-scratch", f"init_from=hf:{directory}",
                      "task=glue/rte", "task.max_train_samples=8", "task.max_eval_samples=4",
                      "trainer.max_steps=1", "trainer.enable_progress_bar=false",
                      f"results_dir={results}")
    assert result.rc == 0, result.err
    (path,) = records_under(results)
    record = read(path.parent)
    assert record["status"] == "ok" and record["config"]["model"]["arch"] == "deberta_v2"
    assert record["checkpoint"]["weights"] == "pytorch_model.bin"
    assert {"accuracy"} <= set(record["metrics"]["validation"])


def test_deberta_v3_lowercases_and_splits_punctuation_as_its_config_says(deberta_v3_dir,
                                                                         tmp_path):
    """DebertaV2Tokenizer's ``do_lower_case`` and ``split_by_punct`` from tokenizer_config.json:
    lowercased text, each punctuation mark encoded apart, as the released tokenizer runs
    sentencepiece on each; as transformers 5 does where no space precedes a mark (before one it
    keeps a lone "▁" the released tokenizer has not)."""
    import shutil
    import unicodedata

    source, sp, _ = deberta_v3_dir
    directory = tmp_path / "cased"
    shutil.copytree(source, directory)
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": True, "split_by_punct": True, "vocab_type": "spm"}))
    _, _, tokenizer = from_hf(directory)
    theirs = transformers.AutoTokenizer.from_pretrained(str(directory))
    for text in ["HELLO world, 1,000 tokens!", "The quick (brown) fox.", "a"]:
        words, word = [], ""
        for char in text.lower():  # the released tokenizer's _run_split_on_punc
            if unicodedata.category(char).startswith("P"):
                words += [word, char] if word else [char]
                word = ""
            else:
                word += char
        expected = [1, *(i for w in [*words, word] if w.strip() for i in sp.encode(w)), 2]
        assert our_ids(tokenizer, text) == expected, text
    text = "HELLO world, 1,000 tokens!"
    assert our_ids(tokenizer, text) == theirs(text)["input_ids"]
