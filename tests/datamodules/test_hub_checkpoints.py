"""Checkpoints by hub id (``datamodules.hub``, ``InitFrom``), offline on a hub cache the tests
write in ``huggingface_hub``'s own layout (``tests/hub_cache.py``): the library itself finds
what the fixture lays out; ids parse by its rules; a local directory wins over an id; the
config check accepts an id with no network and no cache, refuses a malformed one; resolution
takes one weights file, safetensors before the pickle, and pins the commit and the sha256."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from datamodules.errors import PlmbenchError
from datamodules.hub import HubId, cached_snapshot, parse_hub_id, resolve
from datamodules.init_from import InitFrom
from tests.hub_cache import ORG, TAG, lay_into_cache, offline_cache, session_hub_cache


@pytest.fixture(scope="session")
def hub_cache(tmp_path_factory):
    return session_hub_cache(tmp_path_factory)


@pytest.fixture
def offline(hub_cache, monkeypatch):
    offline_cache(monkeypatch, hub_cache[0])
    return hub_cache


def test_huggingface_hub_finds_the_fixture_cache_offline(offline):
    from huggingface_hub import snapshot_download, try_to_load_from_cache

    root, built = offline
    for cached in built.values():
        for revision in ("main", TAG, cached.commit):
            found = try_to_load_from_cache(cached.repo_id, "config.json", revision=revision)
            assert found == str(cached.snapshot / "config.json")
            assert snapshot_download(cached.repo_id, revision=revision,
                                     local_files_only=True) == str(cached.snapshot)
        weights = (cached.snapshot / "model.safetensors")
        assert weights.is_symlink() and weights.resolve().parent == cached.snapshot.parents[1] / (
            "blobs")
        assert weights.resolve().name == cached.weights_sha256  # an LFS blob: its sha256


@pytest.mark.parametrize("text, expected", [
    ("gpt2", HubId("gpt2")),
    ("FacebookAI/roberta-base", HubId("FacebookAI/roberta-base", "main")),
    ("google/electra-base-discriminator@v1.0", HubId("google/electra-base-discriminator",
                                                     "v1.0")),
    ("org/name@refs/pr/1", HubId("org/name", "refs/pr/1")),
    ("a/b/c", None), ("/abs/dir", None), ("./dir", None), ("~/dir", None),
    ("org/na--me", None), ("org/name@", None), ("org/name@bad rev", None), ("", None)])
def test_hub_ids_parse_by_huggingface_hubs_rules(text, expected):
    assert parse_hub_id(text) == expected


def test_a_local_directory_wins_over_a_hub_id_of_the_same_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "name").mkdir(parents=True)
    start = InitFrom.parse("hf:org/name")
    assert start.hub_id is None and start.directory() == Path("org/name")
    assert InitFrom.parse("hf:org/other").hub_id == HubId("org/other")


def test_the_config_check_takes_an_id_without_network_or_cache(tmp_path, monkeypatch):
    offline_cache(monkeypatch, tmp_path / "empty-cache")
    InitFrom.parse("hf:FacebookAI/roberta-base@main").check()  # nothing resolved, no error
    assert not (tmp_path / "empty-cache").exists()
    with pytest.raises(PlmbenchError, match=r"init_from=hf:a/b/c: no directory a/b/c; .*"
                                            r"hf:<org>/<name>\[@<revision>\]"):
        InitFrom.parse("hf:a/b/c").check()


def test_resolution_pins_the_commit_and_the_weights_sha256(offline):
    _, built = offline
    cached = built["roberta"]
    start = InitFrom.parse(cached.spec())
    assert start.directory() == cached.snapshot
    assert start.identity() == {"id": cached.repo_id, "revision": TAG, "commit": cached.commit,
                                "weights": "model.safetensors",
                                "weights_sha256": cached.weights_sha256}
    assert cached_snapshot(HubId(cached.repo_id)) == cached.snapshot


def test_safetensors_is_taken_before_the_pickle_and_the_pickle_alone_works(offline, tmp_path):
    root, built = offline
    source = tmp_path / "both"
    source.mkdir()
    for file in built["bert"].snapshot.iterdir():
        (source / file.name).write_bytes(file.read_bytes())
    (source / "pytorch_model.bin").write_bytes(b"a pickle not to read")
    lay_into_cache(root, f"{ORG}/both", source)
    assert resolve(HubId(f"{ORG}/both")).weights.name == "model.safetensors"
    (source / "model.safetensors").unlink()
    lay_into_cache(root, f"{ORG}/pickle-only", source)
    snapshot = resolve(HubId(f"{ORG}/pickle-only"))
    assert snapshot.weights.name == "pytorch_model.bin"
    assert snapshot.identity()["weights_sha256"] == hashlib.sha256(
        b"a pickle not to read").hexdigest()


def test_a_repository_without_weights_is_one_line(offline, tmp_path):
    root, built = offline
    source = tmp_path / "no-weights"
    source.mkdir()
    (source / "config.json").write_bytes((built["bert"].snapshot / "config.json").read_bytes())
    lay_into_cache(root, f"{ORG}/no-weights", source)
    with pytest.raises(PlmbenchError, match=rf"task.dense.encoder=hf:{ORG}/no-weights: .* not in "
                                            rf"the Hugging Face cache {root}"):
        InitFrom.parse(f"hf:{ORG}/no-weights").directory("task.dense.encoder")


def test_a_local_directory_is_recorded_by_path_and_weights_sha256(hub_cache, tmp_path):
    directory = tmp_path / "bert"
    directory.mkdir()
    for file in hub_cache[1]["bert"].snapshot.iterdir():
        (directory / file.name).write_bytes(file.read_bytes())
    assert InitFrom.parse(f"hf:{directory}").identity() == {
        "directory": str(directory), "weights": "model.safetensors",
        "weights_sha256": hashlib.sha256((directory / "model.safetensors").read_bytes()
                                         ).hexdigest()}
    assert InitFrom.parse("scratch").identity() is None


@pytest.mark.parametrize("error, repository, expected", [
    ("RepositoryNotFoundError", False, "the hub has no model 'org/nmae' (or it is private: set "
                                       "HF_TOKEN); check the spelling"),
    # a mirror (olah) answers a missing revision of a repository it has as a missing repository
    ("RepositoryNotFoundError", True, "the hub has no revision 'v2' of org/nmae"),
    ("GatedRepoError", False, "org/nmae is gated: accept its terms on the hub and set HF_TOKEN"),
    ("RevisionNotFoundError", True, "the hub has no revision 'v2' of org/nmae"),
    ("HfHubHTTPError", True, "the transfer failed (HfHubHTTPError: 503 Service Unavailable); run "
                             "the same command again to retry"),
    ("RemoteEntryNotFoundError", True, "org/nmae@v2 has no model.safetensors or "
                                       "model.safetensors.index.json or pytorch_model.bin or "
                                       "pytorch_model.bin.index.json"),
])
def test_what_the_hub_answers_online_is_one_line_with_its_fix(monkeypatch, tmp_path, error,
                                                              repository, expected):
    """Online (HF_HUB_OFFLINE=0), each error huggingface_hub raises for a bad id or revision, as
    its HTTP layer raises it (a response of the status the hub answers); ``repository``: whether
    the hub has org/nmae at main (asked only to tell a missing revision from a missing
    repository)."""
    import httpx2
    from huggingface_hub import constants, errors

    from datamodules import hub

    offline_cache(monkeypatch, tmp_path / "cache")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    status = {"HfHubHTTPError": 503, "GatedRepoError": 401}.get(error, 404)
    response = httpx2.Response(status, request=httpx2.Request("GET", "https://huggingface.co"))
    message = "503 Service Unavailable" if status == 503 else f"{status} Client Error"

    def refuse(*args, **kwargs):
        raise getattr(errors, error)(message, response=response)

    monkeypatch.setattr("huggingface_hub.snapshot_download", refuse)
    monkeypatch.setattr(hub, "_has_repository", lambda hub_id: repository)
    with pytest.raises(PlmbenchError) as info:
        hub.resolve(HubId("org/nmae", "v2"))
    line = str(info.value)
    assert line.startswith("init_from=hf:org/nmae@v2: ") and "\n" not in line
    assert expected in line and line.endswith(
        f"(hub {constants.ENDPOINT}, cache {tmp_path / 'cache'})")


@pytest.mark.parametrize("has_safetensors", [True, False])
def test_online_one_weights_file_is_fetched_safetensors_first(monkeypatch, tmp_path,
                                                              has_safetensors):
    """What is asked of huggingface_hub online: the load files by pattern (no weights), then
    model.safetensors, and pytorch_model.bin only where the repository lacks it, at the commit
    the revision resolved to."""
    import httpx2
    from huggingface_hub import constants, errors

    from datamodules import hub

    offline_cache(monkeypatch, tmp_path / "cache")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    snapshot = tmp_path / "cache" / "snapshots" / ("c" * 40)
    calls = []

    def snapshot_download(repo_id, revision, allow_patterns):
        calls.append(("snapshot", repo_id, revision, tuple(allow_patterns)))
        return str(snapshot)

    def hf_hub_download(repo_id, filename, revision):
        calls.append(("file", filename, revision))
        if filename == "model.safetensors" and not has_safetensors:
            response = httpx2.Response(404, request=httpx2.Request("GET", "https://hf.co"))
            raise errors.RemoteEntryNotFoundError("404 Client Error", response=response)
        return str(snapshot / filename)

    monkeypatch.setattr("huggingface_hub.snapshot_download", snapshot_download)
    monkeypatch.setattr("huggingface_hub.hf_hub_download", hf_hub_download)
    resolved = hub.resolve(HubId("org/name", "v1"))
    weights = "model.safetensors" if has_safetensors else "pytorch_model.bin"
    assert resolved.commit == "c" * 40 and resolved.weights == snapshot / weights
    assert calls == [("snapshot", "org/name", "v1", hub.LOAD_FILES),
                     ("file", "model.safetensors", "c" * 40),
                     *([] if has_safetensors else [("file", "pytorch_model.bin", "c" * 40)])]
    assert not any(name.endswith((".bin", ".safetensors", "*")) for name in hub.LOAD_FILES)
