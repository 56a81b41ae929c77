"""Shared test setup: DGL's backend, OpenMP's wait policy, and a private gnnplan home/cache per test session.

The test process trains small models in-process while other tests' workers (or other jobs) share the cores;
with libgomp's default spinning wait its parallel regions then stall on descheduled threads, so it waits
passively, as the executor's worker processes do (:data:`executor.threads.WAIT_POLICY`; read when torch loads).
"""

from __future__ import annotations

import os

os.environ.setdefault("DGLBACKEND", "pytorch")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest


@pytest.fixture(autouse=True, scope="session")
def _gnnplan_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep presets written by tests and cached statistics out of the user's ~/.gnnplan."""
    if "GNNPLAN_TEST_KEEP_HOME" not in os.environ:
        home = tmp_path_factory.mktemp("gnnplan-home")
        os.environ["GNNPLAN_HOME"] = str(home)
        os.environ.pop("GNNPLAN_CACHE", None)
