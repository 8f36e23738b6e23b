"""``plmbench models``: the model presets and the checkpoints they start from (issue 27).

    plmbench models list                       every preset (conf/model): its architecture, where
                                               its weights come from (scratch, a hub id, a local
                                               package), its size, and whether a hub checkpoint
                                               is in the Hugging Face cache (no network)
    plmbench models fetch ID... [--to DIR] [--revision REV]
                                               hub checkpoints (``org/name[@rev]``, or a preset
                                               named after one) into the cache, with
                                               huggingface_hub's progress bars; ``--to DIR``
                                               also copies each to ``DIR/<org>--<name>``, a plain
                                               directory a machine without internet reads as
                                               ``init_from=hf:DIR/<org>--<name>``

Downloads are ``huggingface_hub``'s (``datamodules.hub``): the cache is ``HF_HUB_CACHE`` (else
``$HF_HOME/hub``), a gated repository needs ``HF_TOKEN``; ``HF_HUB_OFFLINE=1`` reads the cache
alone, so ``fetch --to`` of a cached checkpoint works offline.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from bench.compose import CONF_DIR
from datamodules.errors import PlmbenchError
from datamodules.hub import HubId, cached_snapshot, copy_snapshot, fetch, parse_hub_id

PRESETS = CONF_DIR / "model"
#: a preset's source when its weights come from a package (``${checkpoint_package:NAME}``)
PACKAGE = "${checkpoint_package:"


def preset(name: str) -> dict:
    """The preset ``conf/model/<name>.yaml`` with the presets its defaults list places under it
    (``bilstm-glue@_here_``), unresolved (no package imported, nothing downloaded)."""
    raw = OmegaConf.to_container(OmegaConf.load(PRESETS / f"{name}.yaml"), resolve=False)
    merged: dict = {}
    for entry in raw.pop("defaults", None) or []:
        if str(entry) != "_self_":
            merged |= preset(str(entry).partition("@")[0])
    return merged | raw


def preset_names() -> list[str]:
    return sorted(path.stem for path in PRESETS.glob("*.yaml"))


def source_of(config: dict) -> tuple[str, HubId | None]:
    """(where a preset's weights come from, as ``list`` shows it; its hub id, if it names one)."""
    init_from = str(config.get("init_from", "scratch"))
    kind, _, where = init_from.partition(":")
    if kind != "hf":
        return init_from, None
    if where.startswith(PACKAGE):
        return f"package {where[len(PACKAGE):].rstrip('}')}", None
    hub_id = parse_hub_id(where)
    return (str(hub_id), hub_id) if hub_id is not None else (init_from, None)


def size(parameters: object) -> str:
    """``parameters`` as 110M / 1.3B; ``-`` where the preset does not say."""
    if not isinstance(parameters, int | float) or isinstance(parameters, bool):
        return "-"
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if parameters >= scale:
            return f"{parameters / scale:.3g}{unit}"
    return str(int(parameters))


def list_rows() -> list[list[str]]:
    """One row per preset: name, architecture, source, parameters, cached."""
    rows = []
    for name in preset_names():
        config = preset(name)
        source, hub_id = source_of(config)
        if hub_id is not None:
            cached = "yes" if cached_snapshot(hub_id) is not None else "no"
        else:
            cached = "-"
        rows.append([name, str(config.get("arch", "-")), source, size(config.get("parameters")),
                     cached])
    return rows


def hub_id_of(text: str, revision: str | None) -> HubId:
    """What ``fetch ID`` names: a preset's hub id, or a hub id itself; ``revision`` for one
    that names none. One line where it is neither."""
    if (PRESETS / f"{text}.yaml").is_file():
        source, hub_id = source_of(preset(text))
        if hub_id is None:
            raise PlmbenchError(f"models fetch {text}: the preset starts from {source}, no hub "
                                "checkpoint; name a preset of a released checkpoint (plmbench "
                                "models list) or a hub id org/name")
        text = str(hub_id)
    hub_id = parse_hub_id(text)
    if hub_id is None:
        raise PlmbenchError(f"models fetch {text}: no model preset of that name and no hub id "
                            "(org/name[@revision]); see `plmbench models list`")
    if revision is not None and "@" not in text:
        hub_id = HubId(hub_id.repo_id, revision)
    return hub_id


def fetch_all(texts: list[str], revision: str | None, to: str | None) -> list[tuple[HubId, Path]]:
    """``models fetch``: every id checked, then fetched into the cache, then (``to``) copied
    out, so a failure leaves nothing in ``to``; (id, where it is). A ``to`` that cannot take
    them (a file, a directory not writable) is one line before anything is fetched."""
    if to:
        from bench.record import check_writable

        check_writable(Path(to), "models fetch --to",
                       "pass --to a directory you can write (it is made if missing)")
    hub_ids = [hub_id_of(text, revision) for text in texts]
    for hub_id in hub_ids if to else ():
        target = Path(to) / hub_id.repo_id.replace("/", "--")
        if target.exists() and not target.is_dir():
            raise PlmbenchError(f"models fetch --to {to}: {target} is a file, where the "
                                f"checkpoint's directory goes; remove it or pass another --to")
    snapshots = [fetch(hub_id) for hub_id in hub_ids]
    return [(s.hub_id, copy_snapshot(s, Path(to)) if to else s.directory) for s in snapshots]


def add_parser(sub) -> None:
    """``models list`` and ``models fetch`` under the ``plmbench`` parser's subcommands."""
    models = sub.add_parser("models", help="model presets and their hub checkpoints: list, "
                            "fetch into the Hugging Face cache")
    models_sub = models.add_subparsers(dest="models_cmd", required=True)
    models_sub.add_parser("list", help="every preset: architecture, source, size, cached")
    fetch_ = models_sub.add_parser("fetch", help="hub checkpoints into the cache (or --to DIR)")
    fetch_.add_argument("ids", nargs="+", metavar="ID",
                        help="a hub id org/name[@revision], or a preset named after one")
    fetch_.add_argument("--revision", help="branch, tag or commit of the ids that name none "
                        "(default: main)")
    fetch_.add_argument("--to", metavar="DIR", help="also copy each checkpoint to "
                        "DIR/<org>--<name>, for init_from=hf:DIR/<org>--<name> on a machine "
                        "without internet")
