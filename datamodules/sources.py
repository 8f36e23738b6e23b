"""Where a dataset split comes from: the local Parquet mirror first, then the Hugging Face hub.

Design contract 5: a split is read from ``$PLMBENCH_DATA/<dataset>/<config>/<split>.parquet``
(the hub's column schema) when that file exists; otherwise from ``datasets.load_dataset`` when the
hub is reachable, or when ``datasets``' cache holds the split from an earlier load (offline, a
compute node reads what the login node loaded); otherwise a one-line error names the split, the
paths tried and the fix.
``mirror_dataset`` writes the mirror from the hub, for compute nodes without internet. A dataset
published as a file rather than on the hub (``FILE_SOURCES``: the Goodreads spoiler corpus,
Universal Dependencies English-EWT's CoNLL-U release) is
only read from the mirror, which ``mirror_dataset`` fills by downloading and converting the file.
"""

import functools
import os
import shutil
import socket
import tempfile
import threading
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import datasets
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datamodules import goodreads, universal_dependencies
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_path

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
CONNECT_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class FileSource:
    """A dataset published as one file, not on the hub: where to download it (the first URL that
    answers), its size for messages, and how it becomes the mirror's splits (downloaded file,
    mirror root) -> the files written."""

    urls: tuple[str, ...]
    size: str
    convert: Callable[[Path, Path], list[Path]]


#: mirror dataset name -> its file source
FILE_SOURCES = {
    goodreads.DATASET: FileSource(goodreads.URLS, goodreads.SIZE, goodreads.convert),
    universal_dependencies.DATASET: FileSource(universal_dependencies.URLS,
                                               universal_dependencies.SIZE,
                                               universal_dependencies.convert),
}


def mirror_root() -> Path:
    """``$PLMBENCH_DATA``, else ``~/.cache/plmbench/data``."""
    root = os.environ.get("PLMBENCH_DATA")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "plmbench" / "data"


def mirror_path(dataset: str, config: str, split: str) -> Path:
    return mirror_root() / dataset / config / f"{split}.parquet"


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def _offline_variable() -> str | None:
    """Name of the first offline switch set to a true value, if any."""
    for name in OFFLINE_VARIABLES:
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on"):
            return name
    return None


@functools.cache
def _can_connect(host: str, port: int) -> bool:
    """One TCP connect, remembered for the process. Name resolution ignores socket timeouts, so
    the probe runs in a daemon thread that is abandoned after ``CONNECT_TIMEOUT_S``."""
    outcome: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
            outcome.append(True)
        except OSError:
            outcome.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT_S)
    return outcome == [True]


def hub_unreachable_reason() -> str | None:
    """Why the hub cannot be used now, or None when it can. Never probes the network when an
    offline switch is set, and never waits more than ``CONNECT_TIMEOUT_S``."""
    switch = _offline_variable()
    if switch:
        return f"{switch}={os.environ[switch]}"
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or 443
    return None if _can_connect(host, port) else f"{host}:{port} unreachable"


def _unreadable(path: Path, error: BaseException) -> PlmbenchError:
    dataset, config = path.parent.parent.name, path.parent.name
    return PlmbenchError(
        f"cannot read {path}: {_first_line(error)}; delete it and re-create it with "
        f"`plmbench data mirror {dataset} {config}`"
    )


def _check_columns(source: str, has: Sequence[str], columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in has]
    if missing:
        raise PlmbenchError(
            f"{source} lacks columns {missing} (has {list(has)}); fix the task's field names "
            "or re-create the data with the hub column schema"
        )


def _check_nulls(source: str, data: datasets.Dataset, columns: Sequence[str]) -> None:
    """No needed column holds a null (a text the tokenizer would fail on, a missing label): the
    first one names the file, column and row."""
    for column in columns:
        values = data.data.column(column)
        if values.null_count:
            row = pc.index(pc.is_null(values), True).as_py()
            raise PlmbenchError(f"{source} column {column} row {row} is null ({values.null_count} "
                                "null rows in all): the task reads every row of it; fill them in "
                                "or drop those rows from the file")


def split_source(dataset: str, config: str, split: str, hub_id: str | None = None) -> str:
    """Where ``load_split`` reads a split from, for messages: the mirror's file, else the hub."""
    if "/" in split:
        config, split = split.split("/", 1)
    path = mirror_path(dataset, config, split)
    return str(path) if path.is_file() else f"hub {hub_id or dataset}/{config}/{split}"


def _binary_as_text(path: Path, columns: Sequence[str], schema: pa.Schema) -> list[str]:
    """The needed columns the file stores as bytes rather than text (``binary``): each must be
    UTF-8, and is read as text; the first row that is not names the file, column and row."""
    binary = [c for c in columns if pa.types.is_binary(schema.field(c).type)
              or pa.types.is_large_binary(schema.field(c).type)]
    for column in binary:
        values = pq.read_table(path, columns=[column]).column(column)
        try:
            pc.cast(values, pa.string())
        except pa.ArrowInvalid:
            for row, value in enumerate(values.to_pylist()):
                try:
                    value is None or value.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise PlmbenchError(
                        f"{path} column {column} row {row} is not UTF-8 text ({err.reason} at "
                        f"byte {err.start} of {value[:40]!r}); re-encode the file's text as UTF-8"
                    ) from None
    return binary


def _read_mirror(path: Path, columns: Sequence[str]) -> datasets.Dataset:
    try:
        footer = pq.ParquetFile(path)  # footer only: cheap corruption check
        schema, rows = footer.schema_arrow, footer.metadata.num_rows
    except Exception as error:
        raise _unreadable(path, error) from error
    _check_columns(str(path), schema.names, columns)
    if rows == 0:
        raise PlmbenchError(f"{path} has no rows; re-create it with `plmbench data mirror "
                            f"{path.parent.parent.name} {path.parent.name}` or point the task at "
                            "a split that has rows")
    binary = _binary_as_text(path, columns, schema)
    try:
        data = datasets.Dataset.from_parquet(str(path))  # cached as Arrow by datasets
    except Exception as error:
        raise _unreadable(path, error) from error
    for column in binary:
        data = data.cast_column(column, datasets.Value("string"))
    _check_nulls(str(path), data, columns)
    return data


def load_split(
    dataset: str,
    config: str,
    split: str,
    columns: Sequence[str] = (),
    hub_id: str | None = None,
) -> datasets.Dataset:
    """One split with all its columns; ``columns`` are the ones the caller needs (checked).
    A split named "<config>/<split>" is that split of another config of the dataset (split names
    hold no "/"), e.g. a sentiment model trained on "books" evaluated on "dvd/test"."""
    if "/" in split:
        config, split = split.split("/", 1)
    path = mirror_path(dataset, config, split)
    if path.is_file():
        return _read_mirror(path, columns)
    check_split(dataset, config, split, hub_id)
    hub = hub_id or dataset
    try:
        data = datasets.load_dataset(hub, config, split=split)
    except Exception as error:
        raise PlmbenchError(
            f"cannot load {hub} config {config} split {split} from the hub: "
            f"{_first_line(error)}; check the task's hub_id, config and split names"
        ) from error
    _check_columns(f"hub {hub}/{config}/{split}", data.column_names, columns)
    _check_nulls(f"hub {hub}/{config}/{split}", data, columns)
    return data


def check_split(dataset: str, config: str, split: str, hub_id: str | None = None) -> None:
    """One line when ``load_split`` could not find the split: not in the mirror, and no hub to
    load it from. Reads no data, so a run's config check calls it before anything loads."""
    if "/" in split:
        config, split = split.split("/", 1)
    path = mirror_path(dataset, config, split)
    if path.is_file():
        return
    if path.exists():
        raise PlmbenchError(f"{path} is a directory, not the Parquet file of {dataset}/{config} "
                            f"split {split}; move it away and mirror the split again "
                            f"(`plmbench data mirror {dataset} {config}`)")
    if dataset in FILE_SOURCES:
        source = FILE_SOURCES[dataset]
        raise PlmbenchError(
            f"{dataset}/{config} split {split} not found: tried {path}, and {dataset} is no hub "
            f"dataset; run `plmbench data mirror {dataset}` where online (it downloads "
            f"{source.urls[0]}, {source.size}, and converts it), or set PLMBENCH_DATA to a "
            "mirror that has it"
        )
    hub = hub_id or dataset
    reason = hub_unreachable_reason()
    if reason is None or in_datasets_cache(hub, config, split):
        return
    present = sorted(p.stem for p in path.parent.glob("*.parquet") if p.is_file())
    command = f"plmbench data mirror {dataset} {config}" + (f" --hub-id {hub}" if hub != dataset
                                                            else "")
    raise PlmbenchError(
        f"{dataset}/{config} split {split} not found: tried {path} (missing; mirror has "
        f"{present or 'no splits of this config'}) and hub {hub} ({reason}); set PLMBENCH_DATA "
        f"to a mirror that has it, or run `{command}` where online"
    )


def in_datasets_cache(hub_id: str, config: str, split: str) -> bool:
    """Whether ``datasets`` holds the split, loaded from the hub before, in its cache
    (``HF_DATASETS_CACHE``: ``<org>___<name>/<config>/<version>/<hash>/<builder>-<split>[-NNNNN-
    of-NNNNN].arrow``), which ``load_dataset`` reads with the hub unreachable or offline."""
    root = Path(datasets.config.HF_DATASETS_CACHE) / hub_id.replace("/", "___") / config
    return any(root.glob(f"*/*/*-{split}.arrow")) or any(root.glob(f"*/*/*-{split}-*-of-*.arrow"))


def list_mirror(root: str | Path | None = None) -> list[dict]:
    """Every mirrored split: dataset, config, split, rows (from Parquet metadata), bytes."""
    root = Path(root) if root is not None else mirror_root()
    listing = []
    for path in sorted(p for p in root.glob("*/*/*.parquet") if p.is_file()):
        try:
            rows = pq.ParquetFile(path).metadata.num_rows
        except Exception as error:
            raise _unreadable(path, error) from error
        dataset, config = path.parent.parent.name, path.parent.name
        size = path.stat().st_size
        listing.append(dict(dataset=dataset, config=config, split=path.stem, rows=rows, bytes=size))
    return listing


def mirror_dataset(
    dataset: str,
    config: str | None = None,
    hub_id: str | None = None,
    root: str | Path | None = None,
) -> list[Path]:
    """Download every split of ``hub_id or dataset`` (``config``) from the hub into the mirror; a
    ``FILE_SOURCES`` dataset from its file."""
    if dataset in FILE_SOURCES:
        return mirror_file(dataset, Path(root) if root is not None else mirror_root())
    hub = hub_id or dataset
    reason = hub_unreachable_reason()
    if reason is not None:
        raise PlmbenchError(
            f"cannot mirror {hub} config {config}: hub not reachable ({reason}); run "
            "`plmbench data mirror` on a machine with internet, then copy the mirror over"
        )
    try:
        splits = datasets.load_dataset(hub, config)
    except Exception as error:
        raise PlmbenchError(
            f"cannot load {hub} config {config} from the hub: {_first_line(error)}; "
            "check the dataset id and config name"
        ) from error
    root = Path(root) if root is not None else mirror_root()
    written = []
    for split, data in splits.items():
        path = root / dataset / (config or data.info.config_name or "default") / f"{split}.parquet"
        with atomic_path(path) as partial:  # readers never see a half-written file
            data.to_parquet(str(partial))
        written.append(path)
    return written


def mirror_file(dataset: str, root: Path) -> list[Path]:
    """Download a ``FILE_SOURCES`` dataset's file beside the mirror, convert it into the mirror's
    splits, and delete the download."""
    source = FILE_SOURCES[dataset]
    switch = _offline_variable()
    if switch:
        raise PlmbenchError(f"cannot download {dataset} with {switch} set; run `plmbench data "
                            "mirror` on a machine with internet, then copy the mirror over")
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=f".{dataset}.") as scratch:
        download = Path(scratch) / Path(urlparse(source.urls[0]).path).name
        errors = []
        for url in source.urls:
            try:
                with urllib.request.urlopen(url, timeout=60) as response, \
                        open(download, "wb") as out:
                    shutil.copyfileobj(response, out, length=1 << 20)
                break
            except OSError as error:
                errors.append(f"{url}: {_first_line(error)}")
        else:
            raise PlmbenchError(f"cannot download {dataset} ({'; '.join(errors)}); check the "
                                "network, or download the file yourself and convert it with "
                                f"datamodules.sources.FILE_SOURCES[{dataset!r}].convert")
        return source.convert(download, root)
