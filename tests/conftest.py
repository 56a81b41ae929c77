"""Shared test setup: DGL's backend, OpenMP's wait policy, a private gnnplan home/cache per test session, and one
proxy draw per small dataset card.

The test process trains small models in-process while other tests' workers (or other jobs) share the cores;
with libgomp's default spinning wait its parallel regions then stall on descheduled threads, so it waits
passively, as the executor's worker processes do (:data:`executor.threads.WAIT_POLICY`; read when torch loads).

A small card's statistics are the medoid of 15 proxy draws (simulator/workload/proxy_pool.py), 15 first
measurements where one proves a test's point: the suite caps the pool at one draw (``GNNPLAN_PROXY_POOL=1``, the
statistics of ``card:<name>@0``), and tests/workload/test_proxy_pool.py raises it where pooling is the point.
"""

from __future__ import annotations

import os

os.environ.setdefault("DGLBACKEND", "pytorch")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ["GNNPLAN_PROXY_POOL"] = "1"

import pytest


@pytest.fixture(autouse=True, scope="session")
def _gnnplan_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep presets written by tests and cached statistics out of the user's ~/.gnnplan."""
    if "GNNPLAN_TEST_KEEP_HOME" not in os.environ:
        home = tmp_path_factory.mktemp("gnnplan-home")
        os.environ["GNNPLAN_HOME"] = str(home)
        os.environ.pop("GNNPLAN_CACHE", None)
