"""Checkpoints downloaded from a hub server (olah on 127.0.0.1, ``tests/servers/hub.py``) by
``plmbench`` processes run as a user's shell runs them, with ``HF_ENDPOINT`` pointing at it:

- ``models fetch`` of tiny checkpoints of several families into an empty cache, by a branch, a
  tag and a commit: each snapshot is the commit its revision names, byte for byte what the
  repository holds; a gated repository with the token;
- an unknown id, a missing revision, a gated repository without a token: one line each naming
  the id and the fix, exit 2, nothing in the cache;
- the server drops the connection in the middle of a weights file: the fetch fails in one line,
  no snapshot holds the half file (offline, the checkpoint is refused, never loaded), and the
  next fetch completes it;
- two processes fetch the same id at once: both end with the same, whole snapshot.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.servers.hub import GATED, MODEL_ARCHS, ORG, TOKEN, plmbench, spawn

BERT = f"{ORG}/tiny-bert"


def snapshot_of(cache: Path, repo_id: str, commit: str) -> Path:
    return cache / "hub" / f"models--{repo_id.replace('/', '--')}" / "snapshots" / commit


def one_error(result) -> list[str]:
    """The one ``error:`` line a refused command ends with (exit 2): huggingface_hub's own
    warnings (a retried download) may come before it, nothing after it."""
    assert result.rc == 2, result.err
    assert len(result.errors) == 1 and result.err.splitlines()[-1] == result.errors[0], result.err
    return result.errors


def assert_snapshot(hub, cache: Path, repo_id: str, revision: str, commit_name: str) -> None:
    """The cache holds ``repo_id``'s snapshot of the commit ``revision`` names, every file equal
    to the repository's at that commit."""
    repo = hub.repos[repo_id]
    commit = repo.revisions[commit_name]
    snapshot = snapshot_of(cache, repo_id, commit)
    assert snapshot.is_dir(), f"{repo_id}@{revision}: no snapshot {commit}"
    for name in ("config.json", "model.safetensors"):
        assert (snapshot / name).read_bytes() == repo.file_at(commit, name), (repo_id, name)


def test_fetch_by_branch_tag_and_commit_into_an_empty_cache(hub, client, tmp_path):
    cache = tmp_path / "cache"
    commits = hub.repos[BERT].revisions
    ids = [f"{ORG}/tiny-{arch}" for arch in MODEL_ARCHS]  # main; tiny-bert's: its second commit
    ids += [f"{BERT}@v1", f"{BERT}@v1-branch", f"{BERT}@{commits['commit1']}"]
    result = plmbench(client, "models", "fetch", *ids)
    assert result.rc == 0, result.err
    for arch in MODEL_ARCHS[1:]:
        assert_snapshot(hub, cache, f"{ORG}/tiny-{arch}", "main", "commit0")
    assert_snapshot(hub, cache, BERT, "main", "commit1")
    assert_snapshot(hub, cache, BERT, "v1", "commit0")
    printed = dict(line.split(": ", 1) for line in result.out.splitlines())
    for revision, commit in [("v1", "commit0"), ("v1-branch", "commit0"),
                             (commits["commit1"], "commit1")]:  # a tag, a branch, a commit
        assert printed[f"{BERT}@{revision}"] == str(snapshot_of(cache, BERT, commits[commit]))
    # the gated repository, with the token
    gated = plmbench(client | {"HF_TOKEN": TOKEN}, "models", "fetch", GATED)
    assert gated.rc == 0, gated.err
    assert_snapshot(hub, cache, GATED, "main", "commit0")


@pytest.mark.parametrize("spec, says", [
    (f"{ORG}/no-such-model", f"models fetch {ORG}/no-such-model: the hub has no model"),
    (f"{BERT}@no-such-branch", f"models fetch {BERT}@no-such-branch: the hub has no revision "
                               f"'no-such-branch' of {BERT}"),
    (GATED, f"models fetch {GATED}: {GATED} is gated"),
])
def test_a_refused_fetch_is_one_line_and_leaves_nothing(hub, client, tmp_path, spec, says):
    result = plmbench(client, "models", "fetch", spec)
    assert result.err.splitlines() == result.errors, result.err  # nothing else printed
    (line,) = one_error(result)
    assert line.startswith(f"error: {says}"), line
    assert hub.endpoint in line  # the server it asked
    repo = spec.partition("@")[0].replace("/", "--")
    assert not list((tmp_path / "cache" / "hub").glob(f"models--{repo}/snapshots/*/*"))


def test_a_download_cut_midway_fails_in_one_line_and_the_next_completes_it(hub, client,
                                                                           tmp_path):
    cache = tmp_path / "cache"
    weights = hub.repos[BERT].file_at("main", "model.safetensors")
    hub.set_faults(cut={f"{BERT}/model.safetensors": len(weights) // 2})
    try:
        cut = plmbench(client, "models", "fetch", BERT)
    finally:
        hub.set_faults()
    (line,) = one_error(cut)
    assert line.startswith(f"error: models fetch {BERT}: ") and "retry" in line, line
    # no snapshot holds the weights: what arrived is huggingface_hub's .incomplete blob
    assert not list(cache.glob("hub/models--*/snapshots/*/model.safetensors"))
    # offline, the checkpoint is refused in one line, not loaded half
    offline = plmbench(client | {"HF_HUB_OFFLINE": "1"}, "models", "fetch", BERT)
    assert "is not in the Hugging Face cache" in one_error(offline)[0]

    again = plmbench(client, "models", "fetch", BERT)
    assert again.rc == 0, again.err
    assert_snapshot(hub, cache, BERT, "main", "commit1")
    assert not list(cache.glob("hub/**/*.incomplete"))


def test_two_processes_fetching_one_id_end_with_the_same_snapshot(hub, client, tmp_path):
    hub.set_faults(slow={f"{BERT}/model.safetensors": 2.0})
    try:
        both = [spawn(client, "models", "fetch", BERT) for _ in range(2)]
        outcomes = [(p.wait(120), *p.communicate()) for p in both]
    finally:
        hub.set_faults()
    for rc, _, err in outcomes:
        assert rc == 0, err
    assert outcomes[0][1] == outcomes[1][1]  # the same snapshot directory printed
    assert_snapshot(hub, tmp_path / "cache", BERT, "main", "commit1")
    weights = snapshot_of(tmp_path / "cache", BERT, hub.repos[BERT].revisions["commit1"])
    assert hashlib.sha256((weights / "model.safetensors").read_bytes()).hexdigest() == \
        hashlib.sha256(hub.repos[BERT].file_at("main", "model.safetensors")).hexdigest()
