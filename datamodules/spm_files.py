"""SentencePiece model files (``spiece.model``, DeBERTa-v2/v3's ``spm.model``) as `tokenizers`
pipelines, without transformers.

T5's, ALBERT's and DeBERTa-v3's released checkpoints ship only SentencePiece's binary model (Kudo
& Richardson 2018). It is a ``ModelProto`` protocol buffer: the pieces with their
log-probabilities and types (normal, unknown, control, user-defined), the trainer's model type
and special ids, and the normalizer: a precompiled character map (NFKC and the like, as a
double-array trie), whether runs of whitespace collapse, whether a word-start marker "▁" is
prepended. It is read with the
schema that the ``sentencepiece`` package ships (``sentencepiece_model_pb2``, decoded by
``protobuf``): the format's reference implementation, maintained by its authors, so no hand-made
parser drifts from it. The unigram model becomes `tokenizers`' ``Unigram`` over the same pieces
and scores (the same Viterbi segmentation, Kudo 2018), the character map its ``Precompiled``
normalizer, the whitespace handling its ``Strip``/``Replace`` normalizers and ``Metaspace``
pre-tokenizer, so the pipeline segments as ``sentencepiece`` itself does (tested against it).

ALBERT's and XLNet's tokenizers clean text before SentencePiece sees it (``preprocess_text``:
`` and '' become ", accents are stripped unless ``keep_accents``, lowercased with
``do_lower_case``); DeBERTa-v2's lowercases with ``do_lower_case`` and, with ``split_by_punct``,
encodes every punctuation mark as a word of its own. An architecture asks for these in its
``TokenizerSpec.spm_preprocess``, with its transformers class's defaults, and a checkpoint's
``tokenizer_config.json`` may override them.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import Unigram

from datamodules.errors import PlmbenchError

#: the names released checkpoints give the model: T5's, ALBERT's, XLNet's; DeBERTa-v2/v3's
MODEL_FILES = ("spiece.model", "spm.model")
METASPACE = "▁"
UNIGRAM = 1  # TrainerSpec.ModelType
CONTROL, USER_DEFINED = 3, 4  # SentencePiece.Type


def model_file(directory: Path) -> Path | None:
    """The SentencePiece model file in ``directory`` (the first of ``MODEL_FILES``), or None."""
    return next((directory / name for name in MODEL_FILES if (directory / name).is_file()), None)


def read_model(path: Path):
    """The ``ModelProto`` in ``path``; one PlmbenchError line where it is no SentencePiece model."""
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError:
        raise PlmbenchError(f"{path} is a SentencePiece model, which needs the sentencepiece and "
                            "protobuf packages: pip install sentencepiece protobuf") from None
    proto = sentencepiece_model_pb2.ModelProto()
    try:
        proto.ParseFromString(path.read_bytes())
    except Exception as err:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise PlmbenchError(f"cannot read {path} as a SentencePiece model ({err}); re-download "
                            "the checkpoint's spiece.model") from None
    if not proto.pieces:
        raise PlmbenchError(f"{path} holds no SentencePiece pieces; re-download it")
    if proto.trainer_spec.model_type != UNIGRAM:
        raise PlmbenchError(f"{path} is a SentencePiece model of type "
                            f"{proto.trainer_spec.model_type} (not unigram); plmbench reads "
                            "unigram models (T5, ALBERT, XLNet, DeBERTa-v3)")
    return proto


def proto_roles(proto) -> dict[str, str]:
    """role -> piece for the special ids the trainer recorded (pad, unk, bos = cls, eos = sep)."""
    spec, pieces = proto.trainer_spec, proto.pieces
    ids = {"pad": spec.pad_id, "unk": spec.unk_id, "cls": spec.bos_id, "sep": spec.eos_id}
    return {role: pieces[i].piece for role, i in ids.items() if 0 <= i < len(pieces)}


def pieces(proto) -> set[str]:
    """The pieces of a ``ModelProto``."""
    return {piece.piece for piece in proto.pieces}


def _preprocess(options: Mapping[str, bool]) -> list:
    """The text cleanup an architecture's options ask for, as normalizers (module docstring):
    ALBERT's / XLNet's ``preprocess_text`` where they name ``keep_accents``; lowercasing with
    ``do_lower_case`` (theirs, DeBERTa-v2's)."""
    steps = []
    if "keep_accents" in options:
        steps += [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
        if not options["keep_accents"]:
            steps += [normalizers.NFKD(), normalizers.StripAccents()]
    if options.get("do_lower_case", False):
        steps.append(normalizers.Lowercase())
    return steps


def spm_tokenizer(path: Path, preprocess: Mapping[str, bool] | None = None,
                  extra: Sequence[str] = ()) -> Tokenizer:
    """The SentencePiece model at ``path`` as a ``tokenizers.Tokenizer`` (no post-processor:
    the architecture's templates come on top); ``preprocess``: the architecture's text cleanup
    options (``_preprocess``; DeBERTa-v2's ``split_by_punct``), or None; ``extra``: special
    tokens the released vocabulary numbers after the model's pieces, in id order (T5's
    sentinels; DeBERTa-v3's [MASK])."""
    proto = read_model(path)
    vocab = [(piece.piece, piece.score) for piece in proto.pieces]
    present = {piece for piece, _ in vocab}
    vocab += [(token, 0.0) for token in extra if token not in present]
    backend = Tokenizer(Unigram(vocab, unk_id=proto.trainer_spec.unk_id,
                                byte_fallback=proto.trainer_spec.byte_fallback))
    spec = proto.normalizer_spec
    steps = _preprocess(preprocess) if preprocess is not None else []
    if spec.precompiled_charsmap:
        steps.append(normalizers.Precompiled(spec.precompiled_charsmap))
    if spec.remove_extra_whitespaces:  # leading, trailing and repeated spaces go
        steps += [normalizers.Strip(), normalizers.Replace(Regex(" {2,}"), " ")]
    if steps:
        backend.normalizer = normalizers.Sequence(steps)
    scheme = "always" if spec.add_dummy_prefix else "never"
    backend.pre_tokenizer = pre_tokenizers.Metaspace(METASPACE, prepend_scheme=scheme)
    if (preprocess or {}).get("split_by_punct", False):  # DeBERTa-v2's: each punctuation mark
        # a word of its own, encoded apart by SentencePiece (so after its own "▁"), and no
        # whitespace left at a word's end (SentencePiece strips each)
        backend.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation("isolated"),
             backend.pre_tokenizer])
    backend.decoder = decoders.Metaspace(METASPACE, prepend_scheme=scheme)
    # control and user-defined pieces are whole tokens, never split (control ones special)
    backend.add_special_tokens([AddedToken(p.piece, special=True, normalized=False)
                                for p in proto.pieces if p.type == CONTROL])
    backend.add_tokens([AddedToken(p.piece, normalized=False)
                        for p in proto.pieces if p.type == USER_DEFINED])
    backend.add_special_tokens([AddedToken(token, special=True, normalized=False)
                                for token in extra])
    return backend
