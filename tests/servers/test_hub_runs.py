"""Runs and the data mirror against the hub server (olah on 127.0.0.1, ``tests/servers/hub.py``),
each ``plmbench`` a process of its own with ``HF_ENDPOINT`` pointing at it:

- ``plmbench data mirror glue rte`` writes the mirror from the server: every split's rows equal
  the dataset's (the shared mirror's RTE, which the server holds in the hub's Parquet layout);
- a run of a released preset by its hub id (``model=minilm-l6``, all-MiniLM-L6-v2's real files)
  on a task whose data is not in the mirror (SQuAD, loaded from the server through
  ``datasets``): its record names the commit; with the server stopped and the offline switches
  set, as on a compute node, the same run reads both from the caches.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from tests.bench.invoke import records_under
from tests.servers.hub import GLUE, MINILM, SQUAD_ROWS, plmbench

RUN = ["run", "model=minilm-l6", f"init_from=hf:{MINILM}", "task=squad/v1",
       f"task.max_train_samples={SQUAD_ROWS // 8}", f"task.max_eval_samples={SQUAD_ROWS // 8}",
       "task.batch_size=4", "task.max_length=128", "task.doc_stride=32",
       "trainer.max_steps=1", "trainer.threads=1",
       "trainer.enable_progress_bar=false"]


def test_data_mirror_writes_the_servers_dataset(hub, client, tmp_path, data_mirror):
    result = plmbench(client, "data", "mirror", "glue", "rte", "--hub-id", GLUE)
    assert result.rc == 0, result.err
    written = sorted((tmp_path / "mirror" / "glue" / "rte").glob("*.parquet"))
    assert [p.stem for p in written] == ["test", "train", "validation"], result.out
    for path in written:
        served = pq.read_table(data_mirror / "glue" / "rte" / path.name)
        mirrored = pq.read_table(path)
        assert mirrored.num_rows == served.num_rows > 0
        for column in served.column_names:
            assert mirrored.column(column).to_pylist() == served.column(column).to_pylist()


def test_a_released_preset_by_hub_id_on_hub_data_then_offline_from_the_caches(hub, client,
                                                                            tmp_path):
    results = tmp_path / "results"
    online = plmbench(client, *RUN, f"results_dir={results}")
    assert online.rc == 0, online.err
    (path,) = records_under(results)
    record = json.loads(path.read_text())
    commit = hub.repos[MINILM].revisions["commit0"]
    assert record["status"] == "ok"
    assert record["checkpoint"]["id"] == MINILM and record["checkpoint"]["commit"] == commit
    assert record["checkpoint"]["weights_sha256"] == hub.repos[MINILM].file_sha256(
        commit, "model.safetensors")
    assert not (tmp_path / "mirror" / "squad").exists()  # read through datasets, not mirrored

    offline_results = tmp_path / "offline"
    with hub.stopped():
        offline = plmbench(client | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}, *RUN,
                           f"results_dir={offline_results}")
    assert offline.rc == 0, offline.err
    (again,) = [json.loads(p.read_text()) for p in records_under(offline_results)]
    assert again["status"] == "ok" and again["checkpoint"] == record["checkpoint"]
    assert again["metrics"] == record["metrics"]  # the same weights, data and seed
