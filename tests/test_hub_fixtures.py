"""The test fixtures never write into the real mirror: ``linked_mirror`` links the real datasets
in and writes a fixture for a dataset the mirror also holds into a directory of its own."""

import pandas as pd

from tests import conftest, hub_fixtures


def test_a_fixture_beside_a_real_dataset_leaves_the_real_files_untouched(tmp_path, monkeypatch):
    real = tmp_path / "real"
    for config in ("cb", "rte"):
        hub_fixtures.write(real, "super_glue", config, "test", 3)
    (real / "glue").mkdir()
    before = {p: p.read_bytes() for p in real.rglob("*.parquet")}
    monkeypatch.setattr(conftest, "MIRROR_CANDIDATES", [real])

    root = hub_fixtures.linked_mirror(tmp_path / "mirror", ("super_glue", "cb", {"test": 8}))

    assert {p: p.read_bytes() for p in real.rglob("*.parquet")} == before
    assert len(pd.read_parquet(root / "super_glue/cb/test.parquet")) == 8  # the fixture's rows
    assert (root / "super_glue/rte").is_symlink() and (root / "glue").is_symlink()
    assert len(pd.read_parquet(root / "super_glue/rte/test.parquet")) == 3  # the real config's
