"""What a net starts from (DESIGN.md contract 6), parsed in one place: ``init_from`` and every
other setting that names a checkpoint (a dense retriever's encoder, a distillation teacher, an
entity tagger).

- ``scratch``: a fresh net (only where a setting allows one);
- ``ckpt:<run dir>``: a plmbench run; its Hugging Face export is ``<run dir>/model``;
- ``hf:<dir>``: a Hugging Face checkpoint directory (config.json, weights, tokenizer files);
- ``hf:<org>/<name>[@<revision>]`` (or a bare ``hf:<name>``, as ``hf:gpt2``): a checkpoint on the
  Hugging Face hub, resolved through ``huggingface_hub`` and its cache (``datamodules.hub``) when
  the run starts; a local directory of that name wins.

Every setting reaches its directory through ``InitFrom.directory``, so a hub id is resolved in
one place; ``check`` is what the config check asks (no network: an id is only validated).
"""

from dataclasses import dataclass
from pathlib import Path

from datamodules.errors import PlmbenchError
from datamodules.hub import WEIGHT_FILES, HubId, parse_hub_id, resolve

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
        forms = "ckpt:<run dir>, hf:<dir> or hf:<org>/<name>[@<revision>]"
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

    @property
    def hub_id(self) -> HubId | None:
        """The hub id an ``hf:`` names where no local directory of that name is there; None for
        a directory, another kind, or a text that is no valid id."""
        if self.kind != "hf" or self.path.is_dir():
            return None
        return parse_hub_id(self.where)

    def check(self, setting: str = "init_from") -> None:
        """What can be checked before the run from file names alone, without network: a
        well-formed hub id (resolved only when the run starts), or a directory that is there,
        with a checkpoint's config.json and weights where it is a Hugging Face layout (its
        architecture and tokenizer files are read with its config.json: ``read_config``);
        else one line."""
        if self.scratch or self.hub_id is not None:
            return
        directory = self.directory(setting)
        if self.kind == "ckpt" and directory.name != EXPORT_DIR \
                and not (directory / CONFIG_FILES[0]).is_file():
            raise PlmbenchError(
                f"{setting}={self}: the run {directory} was saved without its model (no "
                f"{directory / EXPORT_DIR}); run it again with save_model=true, then start "
                "from it")
        if self.kind == "hf" or directory.name == EXPORT_DIR:  # no config.json: name all it lacks
            missing_config = not (directory / CONFIG_FILES[0]).is_file()
            check_hf_directory(directory, EVERY_FILE if missing_config
                               else (CONFIG_FILES, WEIGHT_FILES))

    def identity(self, setting: str = "init_from") -> dict | None:
        """What a run's record keeps of the checkpoint (``record["checkpoint"]``): a hub id's id,
        revision, commit and weights sha256 (``datamodules.hub.Snapshot.identity``), a
        directory's path and weights sha256; None for scratch and ``ckpt:`` (whose record
        holds its own)."""
        if self.kind != "hf":
            return None
        if self.hub_id is not None:
            return resolve(self.hub_id, setting).identity()
        from datamodules.hub import weights_sha256

        directory = self.directory(setting)
        weights = next((directory / f for f in WEIGHT_FILES if (directory / f).is_file()), None)
        return {"directory": str(directory), "weights": weights and weights.name,
                "weights_sha256": weights and weights_sha256(weights)}

    def directory(self, setting: str = "init_from") -> Path:
        """The Hugging Face layout directory it points at: ``hf:``'s (a hub id's snapshot in the
        cache, resolved and downloaded as needed), a ``ckpt:`` run's export (or the directory
        itself); one line naming ``setting`` where there is none."""
        if self.hub_id is not None:
            try:
                return resolve(self.hub_id, setting).directory
            except PlmbenchError as err:  # a mistyped local path reads as a hub id too
                raise PlmbenchError(f"{err} (no local directory {self.path} either)") from None
        path = self.path
        if self.kind == "ckpt" and (path / EXPORT_DIR).is_dir():
            path = path / EXPORT_DIR
        if self.scratch or not path.is_dir():
            raise PlmbenchError(
                f"{setting}={self}: no directory {path}; point it at a Hugging Face checkpoint "
                f"(hf:<dir>, or a hub id hf:<org>/<name>[@<revision>]) or a finished plmbench "
                f"run saved with its model (ckpt:<run dir>)"
            )
        return path


#: a Hugging Face checkpoint directory's files (``lit_models/interop/hf.py`` reads them): each group
#: is one file, the first of its names present
CONFIG_FILES = ("config.json",)
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "spm.model")
EVERY_FILE = (CONFIG_FILES, WEIGHT_FILES, TOKENIZER_FILES)


def check_hf_directory(directory: Path, groups: tuple[tuple[str, ...], ...] = EVERY_FILE
                       ) -> None:
    """One line when ``directory`` lacks one of the ``groups`` of files (by default every one a
    Hugging Face checkpoint has: config.json, weights, tokenizer), read from the file names
    alone."""
    missing = [" or ".join(names) for names in groups
               if not any((directory / name).is_file() for name in names)]
    if missing:
        raise PlmbenchError(
            f"{directory} is not a Hugging Face checkpoint: it lacks {', '.join(missing)}; "
            "point init_from at a directory written by save_pretrained or `to_hf`"
        )
