"""What a net starts from (DESIGN.md contract 6), parsed in one place: ``init_from`` and every
other setting that names a checkpoint (a dense retriever's encoder, a distillation teacher, an
entity tagger).

- ``scratch``: a fresh net (only where a setting allows one);
- ``ckpt:<run dir>``: a plmbench run; its Hugging Face export is ``<run dir>/model``;
- ``hf:<dir>``: a Hugging Face checkpoint directory (config.json, weights, tokenizer files).
"""

from dataclasses import dataclass
from pathlib import Path

from datamodules.errors import PlmbenchError

#: the subdirectory a run exports its net and tokenizer to (Hugging Face layout)
EXPORT_DIR = "model"
KINDS = ("scratch", "ckpt", "hf")


@dataclass(frozen=True)
class InitFrom:
    """A parsed ``kind:where`` (``where`` is empty for scratch); ``str()`` gives it back."""

    kind: str
    where: str = ""

    @classmethod
    def parse(cls, value: object, setting: str = "init_from", pretrained: bool = False
              ) -> "InitFrom":
        """``value`` of ``setting``; ``pretrained``: a setting that needs a checkpoint (no
        scratch). Anything else is refused in one line naming the setting and the forms."""
        text = str(value)
        kind, _, where = text.partition(":")
        if text == "scratch" and not pretrained:
            return cls("scratch")
        if kind in ("ckpt", "hf") and where:
            return cls(kind, where)
        forms = "ckpt:<run dir> or hf:<dir>"
        raise PlmbenchError(f"{setting}={text!r}: use {'' if pretrained else 'scratch, '}{forms}")

    def __str__(self) -> str:
        return self.kind if self.scratch else f"{self.kind}:{self.where}"

    @property
    def scratch(self) -> bool:
        return self.kind == "scratch"

    @property
    def path(self) -> Path:
        """The directory as written (a run's for ``ckpt:``)."""
        return Path(self.where).expanduser()

    def run_dir(self) -> Path | None:
        """The plmbench run a ``ckpt:`` names (its directory, also when pointed at its export);
        None for the other kinds."""
        if self.kind != "ckpt":
            return None
        return self.path.parent if self.path.name == EXPORT_DIR else self.path

    def directory(self, setting: str = "init_from") -> Path:
        """The Hugging Face layout directory it points at: ``hf:``'s, a ``ckpt:`` run's export
        (or the directory itself); one line naming ``setting`` where there is none."""
        path = self.path
        if self.kind == "ckpt" and (path / EXPORT_DIR).is_dir():
            path = path / EXPORT_DIR
        if self.scratch or not path.is_dir():
            raise PlmbenchError(
                f"{setting}={self}: no directory {path}; point it at a Hugging Face checkpoint "
                f"(hf:<dir>) or a finished plmbench run saved with its model (ckpt:<run dir>)"
            )
        return path


#: the files of a Hugging Face checkpoint directory (``lit_models/core/hf.py`` reads them)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model")


def check_hf_directory(directory: Path) -> None:
    """One line when ``directory`` lacks a file every Hugging Face checkpoint has (config.json,
    weights, tokenizer): read from the file names alone, so a run's config check finds it
    before anything loads."""
    missing = [
        " or ".join(names)
        for names in (("config.json",), WEIGHT_FILES, TOKENIZER_FILES)
        if not any((directory / name).is_file() for name in names)
    ]
    if missing:
        raise PlmbenchError(
            f"{directory} is not a Hugging Face checkpoint: it lacks {', '.join(missing)}; "
            "point init_from at a directory written by save_pretrained or `to_hf`"
        )
