"""A run's directory: its name, who may run into it, and the log it keeps.

- **Name.** ``<results_dir>/<task>/<label>[/<variant>]/seed<N>``: the variant names the
  command-line overrides that change the config hash (``bench.config_identity.run_variant``
  writes them as ``key:value+...``); an override equal to the default (``optim.lr`` at the
  preset's own rate, ``trainer=cpu``) adds nothing, so one configuration has one directory
  whichever way it was spelled. The directory is always inside ``results_dir``.
- **Claim.** Before a run starts it takes ``<run dir>/.lock`` (created exclusively, holding the
  owner's pid, host and start time, its mtime refreshed every ``HEARTBEAT_S``), so two sweeps
  of the same points into one results directory never train a point twice: the second skips a
  point another live process holds. A lock whose owner is gone (a dead pid on this host, or no
  heartbeat for ``STALE_S`` from another host) is stale and taken over. Under the lock, the
  point's record decides: an ok record of the same configuration is skipped, a failed one is
  re-run unless the configuration itself failed (``failure_kind: configuration``, a diverging
  loss), which only ``--rerun-failed`` runs again.
- **Log.** ``<run dir>/run.log`` receives everything logged while the run runs (Lightning's own
  messages and Python warnings included, appended across resumptions) and, when it fails, the
  traceback its record's one-line error summarises.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import socket
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, ListConfig

from bench.compose import CONF_DIR, compose_config, composed_hash
from bench.config_identity import PATH_KEYS, is_volatile, run_variant
from bench.record import record_at
from datamodules import strict_json
from datamodules.errors import PlmbenchError

log = logging.getLogger("plmbench")

LOCK_NAME = ".lock"
HEARTBEAT_S = 30.0
STALE_S = 300.0
LOG_NAME = "run.log"
#: loggers that do not propagate to the root logger (Lightning installs its own handler)
OWN_LOGGERS = ("lightning.pytorch", "lightning.fabric", "py.warnings")


def _is_group(key: str, dirs: Sequence[str]) -> bool:
    """Whether an override's key picks a config group's option (``trainer=cpu``)."""
    return "/" in key or any((Path(root) / key).is_dir() for root in (CONF_DIR, *dirs))


def effective_overrides(overrides: Sequence[str], cfg: DictConfig, current_hash: str,
                        dirs: Sequence[str] = ()) -> list[str]:
    """The overrides without which ``cfg`` (what they compose, hashing to ``current_hash``) would
    be another configuration, and that the run's path does not name already (task, model,
    label, seed, experiment): a value that differs from the one the groups' YAMLs give (those
    composed alone, once), a key added or deleted, a group option whose leaving-out changes the
    hash (``dirs``: the ``--config-dir`` search path). Keys the hash ignores never count."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    groups = [o.input_line for o in parsed if _is_group(o.key_or_group, dirs)]
    search = [o.input_line for o in parsed if o.key_or_group.startswith("hydra.")]
    defaults = _composed(tuple(groups + search), tuple(dirs))
    kept = []
    for override in parsed:
        key, line = override.key_or_group, override.input_line
        if key in PATH_KEYS or key.startswith(("hydra.", "hydra/")) or is_volatile(key):
            continue
        if override.is_delete() or override.is_add():
            kept.append(line)
        elif line in groups:
            rest = [o for o in overrides if o != line]
            try:
                if composed_hash(rest, dirs) != current_hash:
                    kept.append(line)
            except PlmbenchError:  # the rest does not compose without it: it matters
                kept.append(line)
        elif _value(defaults, key) != _value(cfg, key):
            kept.append(line)
    return kept


@functools.lru_cache(maxsize=16)
def _composed(groups: tuple[str, ...], dirs: tuple[str, ...]) -> DictConfig:
    return compose_config(list(groups), "fix the override", dirs)


def _value(cfg: DictConfig, key: str) -> str:
    """The resolved value at a dotted key as canonical JSON ("<absent>" where there is none)."""
    from omegaconf import OmegaConf

    marker = object()
    value = OmegaConf.select(cfg, key, default=marker)
    if value is marker:
        return "<absent>"
    if isinstance(value, DictConfig | ListConfig):
        value = OmegaConf.to_container(value, resolve=True)
    return json.dumps(value, sort_keys=True, default=str)


def run_dir_of(cfg: DictConfig, variant: Sequence[str]) -> Path:
    """``<results_dir>/<task>/<label>[/<variant>]/seed<N>`` (module docstring), ``variant`` the
    ``effective_overrides``; a path that would leave ``results_dir`` is refused in one line."""
    name = run_variant(variant)
    parts = [cfg.task.name, cfg.label, *([name] if name else []), f"seed{cfg.seed}"]
    root = Path(os.path.normpath(Path(cfg.results_dir).absolute()))
    run_dir = Path(cfg.results_dir).joinpath(*map(str, parts))
    if not Path(os.path.normpath(run_dir.absolute())).is_relative_to(root) or any(
            part in ("..", ".") for part in run_dir.relative_to(cfg.results_dir).parts):
        raise PlmbenchError(f"task {cfg.task.name!r} with label {cfg.label!r} names {run_dir}, "
                            f"outside results_dir={cfg.results_dir}; use plain names")
    return run_dir


def _owner() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}


def _alive(owner: dict, age_s: float) -> bool:
    """Whether the process that wrote a lock may still run."""
    if owner.get("host") != socket.gethostname():
        return age_s < STALE_S
    try:
        os.kill(int(owner.get("pid", -1)), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OverflowError):
        return True  # it exists, another user's
    return True


def _take(lock: Path) -> dict | None:
    """Create ``lock`` for this process; None when it is ours now, else the live owner's entry."""
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            try:
                owner = json.loads(lock.read_text() or "{}")
                age = time.time() - lock.stat().st_mtime
            except (OSError, ValueError):
                owner, age = {}, STALE_S  # half-written or gone: its writer died or is done
            if _alive(owner, age):
                return owner
            log.warning("%s: removing the stale lock of pid %s on %s", lock.parent,
                        owner.get("pid"), owner.get("host"))
            lock.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(strict_json.dumps(_owner()))
        return None
    return {"pid": "?", "host": "?"}  # another process took it over between our two tries


@contextlib.contextmanager
def _heartbeat(lock: Path) -> Iterator[None]:
    """Refresh ``lock``'s mtime every HEARTBEAT_S while the run holds it; remove it after."""
    done = threading.Event()

    def beat() -> None:
        while not done.wait(HEARTBEAT_S):
            with contextlib.suppress(OSError):
                os.utime(lock)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        lock.unlink(missing_ok=True)


def completed(run_dir: Path, current_hash: str, skip_completed: bool) -> bool:
    """Whether ``run_dir``'s record says ok for this configuration and ``skip_completed`` lets
    it stand: a point ``should_run`` will skip, so nothing it starts from need be there."""
    previous = record_at(run_dir)
    return bool(skip_completed and previous and previous.status == "ok"
                and previous.config_hash == current_hash)


def should_run(run_dir: Path, current_hash: str, skip_completed: bool,
               only_failed: bool = False) -> bool:
    """Whether to run into ``run_dir`` given its record (module docstring, "Claim"); a finished
    run of another configuration there is never overwritten silently."""
    previous = record_at(run_dir)
    if only_failed and (previous is None or previous.status != "failed"):
        log.info("skip %s: only failed runs are re-run", run_dir)
        return False
    if previous is None:
        return True
    same = previous.config_hash == current_hash
    ok = previous.status == "ok"
    if same and ok and skip_completed:
        log.info("skip %s: its record says ok for this configuration (skip_completed=false "
                 "re-runs it)", run_dir)
        return False
    if same and not ok and skip_completed and not only_failed:
        if previous.failure_kind == "configuration":
            log.warning("skip %s: this configuration failed (%s); --rerun-failed runs it again",
                        run_dir, previous.error)
            return False
        log.info("%s failed before (%s); running it again", run_dir, previous.error)
        return True
    if not same and ok and skip_completed:
        raise PlmbenchError(
            f"{run_dir} holds a finished run of another configuration (config hash "
            f"{previous.config_hash}, now {current_hash}); set label=NAME to keep both, "
            "or skip_completed=false to replace it"
        )
    log.warning("%s: replacing its %s record (config hash %s, now %s)", run_dir,
                previous.status, previous.config_hash, current_hash)
    return True


@contextlib.contextmanager
def claimed(run_dir: Path, current_hash: str, skip_completed: bool,
            only_failed: bool = False) -> Iterator[bool]:
    """Hold ``run_dir``'s lock while the body runs; yields whether to run (``should_run``), False
    when another live process holds the point. Ranks other than zero of a DDP run (which rank
    zero's run started) take no lock."""
    if rank_zero_only.rank != 0:
        yield should_run(run_dir, current_hash, skip_completed, only_failed)
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = run_dir / LOCK_NAME
    owner = _take(lock)
    if owner is not None:
        log.warning("skip %s: pid %s on %s is running it (its lock %s)", run_dir,
                    owner.get("pid"), owner.get("host"), lock)
        yield False
        return
    with _heartbeat(lock):
        yield should_run(run_dir, current_hash, skip_completed, only_failed)


@contextlib.contextmanager
def run_log(run_dir: Path) -> Iterator[None]:
    """Everything logged while the run runs also goes to ``<run dir>/run.log`` (appended to),
    and a failure's traceback after it."""
    if rank_zero_only.rank != 0:
        yield
        return
    handler = logging.FileHandler(run_dir / LOG_NAME, encoding="utf-8")
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] %(message)s"))
    handler.setLevel(logging.DEBUG)
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in OWN_LOGGERS
                                      if not logging.getLogger(name).propagate)]
    for logger in loggers:
        logger.addHandler(handler)
    logging.captureWarnings(True)
    try:
        yield
    except BaseException:
        handler.stream.write(f"[run failed]\n{traceback.format_exc()}")
        raise
    finally:
        logging.captureWarnings(False)
        for logger in loggers:
            logger.removeHandler(handler)
        handler.close()
