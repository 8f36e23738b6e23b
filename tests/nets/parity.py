"""What the tests comparing nets with transformers share: random weights, padded batches (single
texts, sentence pairs, sources with decoder inputs), the comparison, and the fine-tuned
classification head's round trip through transformers."""

from pathlib import Path

import torch
from torch.nn.utils import vector_to_parameters

from datamodules.collate import pad_collate
from datamodules.tokenization import TextTokenizer
from lit_models.archs import Model
from lit_models.archs.spec import Arch
from lit_models.interop.hf import from_hf, load_head, to_hf

#: max abs difference allowed against transformers, float32
TOLERANCE = 1e-5
TEXT = [
    "The quick brown fox jumped over the lazy dog.",
    "Hello, world! It was a bright cold day in April, and the clocks were striking thirteen.",
    "A cat sat on the mat and it was playing with a ball of wool.",
    "Dogs jump. Cats sleep. Birds sing in the morning.",
] * 20


def batch(tokenizer: TextTokenizer, texts: list[str]) -> dict[str, torch.Tensor]:
    """A dynamically padded batch, as the datamodules build it (lengths differ: padding)."""
    encodings = tokenizer.backend.encode_batch(texts)
    examples = [{"input_ids": e.ids} for e in encodings]
    return pad_collate(examples, pad_id=tokenizer.special.pad)

def segments(tokenizer: TextTokenizer, pairs: list[tuple[str, str]]) -> dict:
    """A padded batch of sentence pairs (token type ids 0 and 1)."""
    encodings = [tokenizer.backend.encode(a, b) for a, b in pairs]
    examples = [{"input_ids": e.ids, "token_type_ids": e.type_ids} for e in encodings]
    return pad_collate(examples, pad_id=tokenizer.special.pad)


def seq2seq_batch(tokenizer: TextTokenizer, sources: list[str], targets: list[str],
                  start: list[int] = ()) -> dict[str, torch.Tensor]:
    """A padded source batch and right-padded decoder inputs of other lengths, each after
    ``start`` (T5's decoder starts at its pad), with the decoder's mask as ``decoder_mask``."""
    encode, pad = tokenizer.backend.encode_batch, tokenizer.special.pad
    batch = pad_collate([{"input_ids": e.ids} for e in encode(sources)], pad)
    decoder = pad_collate([{"input_ids": [*start, *e.ids]} for e in encode(targets)], pad)
    batch["decoder_input_ids"] = decoder["input_ids"]
    batch["decoder_mask"] = decoder["attention_mask"]
    assert (batch["attention_mask"] == 0).any() and (decoder["attention_mask"] == 0).any()
    return batch


def randomize_(model: torch.nn.Module) -> torch.nn.Module:
    """Every weight N(0, 0.3) (biases and LayerNorms too, unlike a fresh init)."""
    torch.manual_seed(0)
    n = sum(p.numel() for p in model.parameters())
    vector_to_parameters(0.3 * torch.randn(n), model.parameters())
    return model.eval()


def max_diff(ours: torch.Tensor, theirs: torch.Tensor, mask: torch.Tensor) -> float:
    """Max abs difference over the non-pad positions."""
    ours, theirs = ours[mask.bool()], theirs[mask.bool()]
    assert ours.shape == theirs.shape
    return (ours - theirs).abs().max().item()


def assert_close(ours: torch.Tensor, theirs: torch.Tensor, mask: torch.Tensor) -> None:
    assert max_diff(ours, theirs, mask) <= TOLERANCE


def assert_classifier_round_trips(arch: Arch, reference: torch.nn.Module, directory: Path,
                                  tokenizer: TextTokenizer, inputs: dict, tmp_path: Path) -> None:
    """A transformers *ForSequenceClassification (3 labels) saved in ``directory``: its head is
    imported, scores as transformers does, and exports to a checkpoint transformers scores the
    same; a head of another label count is not loaded."""
    import transformers

    _, encoder, _ = from_hf(directory)
    head = arch.classification_head(encoder.config, 3, dropout=0.1)
    assert load_head(head, directory, arch.hf.classifier_names)
    assert not load_head(arch.classification_head(encoder.config, 2, 0.1), directory,
                         arch.hf.classifier_names)
    with torch.no_grad():
        ours = head.eval()(encoder.eval()(**inputs))
        assert (ours - reference(**inputs).logits).abs().max() <= TOLERANCE
    to_hf(Model(arch, encoder, tokenizer), tmp_path / "export", head, ["a", "b", "c"])
    again = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "export")
    assert again.config.id2label == {0: "a", 1: "b", 2: "c"}
    with torch.no_grad():
        assert (again.eval()(**inputs).logits - ours).abs().max() <= TOLERANCE
