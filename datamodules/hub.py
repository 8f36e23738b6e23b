"""Checkpoints by Hugging Face hub id (DESIGN.md contract 6): ``hf:<org>/<name>[@<revision>]``.

``huggingface_hub`` resolves an id into the user's Hugging Face cache (``HF_HOME``,
``HF_HUB_CACHE``; ``HF_TOKEN`` for gated or private repositories; ``HF_HUB_OFFLINE=1`` reads the
cache alone), downloading only what a load reads (``LOAD_FILES``: config.json, the tokenizer's
files, and one set of weights: ``model.safetensors`` where the repository has it, else
``pytorch_model.bin``, never both; either may be sharded, an index ``<name>.index.json`` naming its
shards, as ``save_pretrained(max_shard_size=...)`` writes large models, and then the shards are
downloaded). The revision (a branch, tag or commit; ``main`` by default) is pinned to the commit it
resolved to, and the run's record names the id, that commit and the weights' sha256 (``identity``),
so a board row says exactly which weights it measured.

Everything that can go wrong (offline and not cached, a mistyped id, a missing revision, a gated
repository without a token, a download that breaks off) is one ``PlmbenchError`` line naming the
id, the hub and the cache it used, and the fix. A download that breaks off leaves no file in a
snapshot: huggingface_hub keeps what arrived as ``blobs/<etag>.incomplete`` and the next attempt
resumes it; two processes fetching one id wait on huggingface_hub's per-file locks and end with
the same snapshot. A resolution is kept for the process (a sweep resolves each id once).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from datamodules.errors import PlmbenchError
from datamodules.files import staging_dir

#: the weights' formats, the first one a checkpoint has taken: safetensors, then the pickle
WEIGHT_FORMATS = ("model.safetensors", "pytorch_model.bin")
#: a sharded checkpoint's index (``{"weight_map": {tensor name: shard file}}``) is named after
#: its format: ``model.safetensors.index.json``
INDEX_SUFFIX = ".index.json"
#: the weights files a load reads, the first one present taken: each format whole, then sharded
WEIGHT_FILES = tuple(name for fmt in WEIGHT_FORMATS for name in (fmt, fmt + INDEX_SUFFIX))
#: what a load reads besides the weights: config.json and every tokenizer file a published
#: checkpoint may carry (WordPiece's vocab.txt, byte-level BPE's vocab.json + merges.txt,
#: SentencePiece's spiece.model (DeBERTa-v3's spm.model), the tokenizer.json the fast tokenizers
#: write, and their configs), and the shard indexes (a few kilobytes), which say whether the
#: weights are sharded
LOAD_FILES = ("config.json", "tokenizer.json", "vocab.txt", "vocab.json", "merges.txt",
              "spiece.model", "spm.model", "tokenizer_config.json", "special_tokens_map.json",
              *(fmt + INDEX_SUFFIX for fmt in WEIGHT_FORMATS))
DEFAULT_REVISION = "main"
#: a revision: a branch, a tag (``v1.0``), a commit or a pull request's ref (``refs/pr/1``)
REVISION = re.compile(r"[\w.\-/]+")


@dataclass(frozen=True)
class HubId:
    """A checkpoint's hub id and revision, as ``hf:<repo_id>[@<revision>]`` writes them."""

    repo_id: str
    revision: str = DEFAULT_REVISION

    def __str__(self) -> str:
        return self.repo_id + ("" if self.revision == DEFAULT_REVISION else f"@{self.revision}")


def parse_hub_id(text: str) -> HubId | None:
    """``org/name[@revision]`` (or a bare ``name``, as ``gpt2``) as a ``HubId``; None where the
    text is no valid hub id (a path, a malformed name), by ``huggingface_hub``'s own rules."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    repo_id, at, revision = text.partition("@")
    if at and not REVISION.fullmatch(revision):
        return None
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return None
    return HubId(repo_id, revision or DEFAULT_REVISION)


def cache_dir() -> Path:
    """The hub cache ``huggingface_hub`` reads and writes (``HF_HUB_CACHE``, else
    ``$HF_HOME/hub``)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


@dataclass(frozen=True)
class Snapshot:
    """A resolved checkpoint: the snapshot directory in the cache (or ``to``), the commit its
    revision resolved to and the weights file in it."""

    hub_id: HubId
    directory: Path
    commit: str
    weights: Path

    def identity(self) -> dict:
        """What a run's record keeps of it (``record["checkpoint"]``)."""
        return {"id": self.hub_id.repo_id, "revision": self.hub_id.revision,
                "commit": self.commit, "weights": self.weights.name,
                "weights_sha256": weights_sha256(self.weights)}


def endpoint() -> str:
    """The hub ``huggingface_hub`` asks (``HF_ENDPOINT``, else huggingface.co)."""
    from huggingface_hub import constants

    return constants.ENDPOINT


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The errors of the HTTP client ``huggingface_hub`` downloads with (httpx2): a connection
    dropped in the middle of a file is ``httpx2.RemoteProtocolError``, no ``OSError``."""
    try:
        import httpx2
    except ImportError:  # an older huggingface_hub: requests, whose errors are OSErrors
        return ()
    return (httpx2.HTTPError,)


def _has_repository(hub_id: HubId) -> bool:
    """Whether the hub has ``hub_id``'s repository on branch main: a mirror (olah) answers a
    missing revision as a missing repository, where huggingface.co says RevisionNotFound."""
    from huggingface_hub import HfApi

    try:
        HfApi().model_info(hub_id.repo_id, revision=DEFAULT_REVISION)
    except Exception:  # noqa: BLE001 - any failure: not known to exist
        return False
    return True


def _refusal(name: str, hub_id: HubId, err: BaseException) -> PlmbenchError:
    """One line for a failed resolution of ``hub_id`` (``name``: what asked for it, as the user
    wrote it): what went wrong, the hub and the cache it used, the fix."""
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    fetch = f"`plmbench models fetch {hub_id.repo_id}"
    fetch += f" --revision {hub_id.revision}`" if hub_id.revision != DEFAULT_REVISION else "`"
    where = f"hub {endpoint()}, cache {cache_dir()}"
    status = getattr(getattr(err, "response", None), "status_code", None)
    missing_revision = isinstance(err, RevisionNotFoundError) or (
        isinstance(err, RepositoryNotFoundError) and not isinstance(err, GatedRepoError)
        and hub_id.revision != DEFAULT_REVISION and _has_repository(hub_id))
    if missing_revision:
        why = (f"the hub has no revision {hub_id.revision!r} of {hub_id.repo_id}; name a branch, "
               "tag or commit it has")
    elif isinstance(err, GatedRepoError):
        why = (f"{hub_id.repo_id} is gated: accept its terms on the hub and set HF_TOKEN to a "
               "token of that account")
    elif isinstance(err, EntryNotFoundError) and not isinstance(err, LocalEntryNotFoundError):
        why = (f"{hub_id} has no {' or '.join(WEIGHT_FILES)} (plmbench reads PyTorch weights, "
               "not TensorFlow-, Flax- or GGUF-only ones); pick a checkpoint that has them")
    elif isinstance(err, RepositoryNotFoundError):
        why = (f"the hub has no model {hub_id.repo_id!r} (or it is private: set HF_TOKEN); check "
               "the spelling")
    elif isinstance(err, LocalEntryNotFoundError) or constants.HF_HUB_OFFLINE:
        why = (f"{hub_id} is not in the Hugging Face cache {cache_dir()} and the hub is not "
               f"reachable{' (HF_HUB_OFFLINE=1)' if constants.HF_HUB_OFFLINE else ''}; run "
               f"{fetch} on a machine with internet (HF_HUB_CACHE pointed at this cache, or --to "
               "DIR and hf:DIR/...), or set HF_HUB_OFFLINE=0 where the hub is reachable; check "
               "the spelling of the id and revision")
        return PlmbenchError(f"{name}: {why}")
    elif isinstance(err, _transport_errors()) and not isinstance(err, HfHubHTTPError) or (
            status is not None and status >= 500):
        first = " ".join(str(err).split()) or type(err).__name__
        why = (f"the transfer failed ({type(err).__name__}: {first[:200]}); run the same "
               "command again to retry: huggingface_hub resumes a download that broke off from "
               "what arrived (kept apart as *.incomplete, never loaded)")
    else:
        first = (str(err).splitlines() or [type(err).__name__])[0]
        why = (f"it could not be fetched ({type(err).__name__}: {first}); check the id, the "
               "network and that the cache is writable, then retry")
    return PlmbenchError(f"{name}: {why} ({where})")


def _download(hub_id: HubId) -> Snapshot:
    """``hub_id``'s load files and one set of weights in the cache, by ``huggingface_hub``: a
    format's index (fetched with the load files) means its shards, else its one file."""
    from huggingface_hub import hf_hub_download, snapshot_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    directory = Path(snapshot_download(hub_id.repo_id, revision=hub_id.revision,
                                       allow_patterns=list(LOAD_FILES)))
    commit = directory.name  # a cache snapshot is named by its commit
    missing: Exception | None = None
    for name in WEIGHT_FORMATS:  # safetensors where the repository has it, else the pickle
        index = directory / (name + INDEX_SUFFIX)
        try:
            if index.is_file():
                for shard in shard_names(index):
                    hf_hub_download(hub_id.repo_id, shard, revision=commit)
                return Snapshot(hub_id, directory, commit, index)
            weights = Path(hf_hub_download(hub_id.repo_id, name, revision=commit))
        except (EntryNotFoundError, LocalEntryNotFoundError) as err:
            missing = missing or err
            continue
        return Snapshot(hub_id, directory, commit, weights)
    assert missing is not None
    raise missing


def shard_names(index: Path) -> list[str]:
    """The shard files a sharded checkpoint's index names (its ``weight_map``'s values), in
    order; one line where the index does not read as one."""
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        names = list(dict.fromkeys(weight_map.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise PlmbenchError(f"cannot read the shard index {index} ({type(err).__name__}: "
                            f"{err}); re-export the checkpoint") from None
    if not names or not all(isinstance(n, str) and "/" not in n for n in names):
        raise PlmbenchError(f"the shard index {index} names no shard files beside it; "
                            "re-export the checkpoint")
    return names


def weight_shards(weights: Path) -> list[Path]:
    """The files holding a checkpoint's weights: ``weights`` itself, or the shards its index
    names (each beside it, else one line naming those missing)."""
    if not weights.name.endswith(INDEX_SUFFIX):
        return [weights]
    shards = [weights.parent / name for name in shard_names(weights)]
    if missing := [shard.name for shard in shards if not shard.is_file()]:
        raise PlmbenchError(f"{weights.parent} lacks the shards {missing} its index "
                            f"{weights.name} names; download or copy the whole checkpoint")
    return shards


def _resolved(hub_id: HubId, name: str) -> Snapshot:
    from huggingface_hub.errors import HfHubHTTPError, HFValidationError, LocalEntryNotFoundError

    try:
        return _download(hub_id)
    except (HfHubHTTPError, LocalEntryNotFoundError, HFValidationError, OSError,
            *_transport_errors()) as err:
        raise _refusal(name, hub_id, err) from None


@functools.cache
def resolve(hub_id: HubId, setting: str = "init_from") -> Snapshot:
    """``hub_id`` resolved into the cache (downloaded where it is missing and the hub is
    reachable), once per process; one ``PlmbenchError`` line, naming ``setting``, where it
    cannot be."""
    return _resolved(hub_id, f"{setting}=hf:{hub_id}")


def fetch(hub_id: HubId) -> Snapshot:
    """``plmbench models fetch``: ``hub_id`` into the cache (huggingface_hub shows its own
    progress bars); one line naming it where it cannot be."""
    return _resolved(hub_id, f"models fetch {hub_id}")


def copy_snapshot(snapshot: Snapshot, to: Path) -> Path:
    """``snapshot``'s files copied into the plain directory ``<to>/<org>--<name>`` (the cache's
    symlinks followed), usable as ``hf:<that directory>`` on a machine without internet; it
    appears whole or not at all."""
    target = Path(to) / snapshot.hub_id.repo_id.replace("/", "--")
    tmp = staging_dir(target)
    try:
        for name in [*LOAD_FILES, *(shard.name for shard in weight_shards(snapshot.weights)),
                     snapshot.weights.name]:
            if (snapshot.directory / name).is_file():
                shutil.copyfile(snapshot.directory / name, tmp / name)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def cached_snapshot(hub_id: HubId) -> Path | None:
    """The cached snapshot directory of ``hub_id`` holding its config.json and a weights file;
    None where the cache lacks either (no network is used)."""
    from huggingface_hub import try_to_load_from_cache

    config = try_to_load_from_cache(hub_id.repo_id, "config.json", revision=hub_id.revision)
    if not isinstance(config, str):
        return None
    directory = Path(config).parent
    for name in WEIGHT_FILES:
        if (directory / name).is_file():
            try:
                weight_shards(directory / name)  # a sharded one: every shard there
            except PlmbenchError:
                return None
            return directory
    return None


def _file_sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        while chunk := handle.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def weights_sha256(file: Path) -> str:
    """The sha256 of a weights file's bytes (what the hub's LFS pointer names it by); for a
    sharded checkpoint's index, the sha256 of its shards' "<name> <sha256>" lines, one per
    shard in the index's order."""
    if not file.name.endswith(INDEX_SUFFIX):
        return _file_sha256(file)
    lines = "".join(f"{shard.name} {_file_sha256(shard)}\n" for shard in weight_shards(file))
    return hashlib.sha256(lines.encode()).hexdigest()
