"""One dask.distributed LocalCluster for the session: two worker processes of one thread each,
started once (a few seconds) by the first test that asks for `client`; the nanny restarts a worker
a test kills. Not the default scheduler: tests name it (client.compute)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster, timeout=60, set_as_default=False) as c:
        yield c
