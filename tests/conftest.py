"""Shared test setup: DGL's backend, OpenMP's wait policy, a private gnnplan home/cache per test session, and one
proxy draw per small dataset card.

The test process trains small models in-process while other tests' workers (or other jobs) share the cores;
with libgomp's default spinning wait its parallel regions then stall on descheduled threads, so it waits
passively, as the executor's worker processes do (:data:`executor.threads.WAIT_POLICY`; read when torch loads).

A small card's statistics are the medoid of 15 proxy draws (simulator/workload/proxy_pool.py), 15 first
measurements where one proves a test's point: the suite caps the pool at one draw (``GNNPLAN_PROXY_POOL=1``, the
statistics of ``card:<name>@0``), and tests/workload/test_proxy_pool.py raises it where pooling is the point.

The README's test command runs the suite in two parts: every test not marked ``serial`` on 2 pytest-xdist workers
(``-n 2 -m "not serial"``), then the ``serial`` ones alone (``-m serial``). A test is ``serial`` when what it checks
depends on having the machine to itself: it times a real run or reads this machine's load or rates (probe, run
load, the held-out error of a loop), shapes an emulated network, waits out a timeout or a kill, or drives headless
Chromium. Every test under :data:`SERIAL_FOLDERS` is, and a module elsewhere says so with ``pytestmark``. Tests that
start worker processes only to compare what they compute (equivalence, checkpoints) are not: a busy process beside
them slows them, it does not change their result. ``python3 -m pytest -q`` alone still runs every test, one at a time.
"""

from __future__ import annotations

import os

os.environ.setdefault("DGLBACKEND", "pytorch")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ["GNNPLAN_PROXY_POOL"] = "1"

from pathlib import Path

import pytest

SERIAL_FOLDERS = ("executor",)
"""Folders whose tests are all ``serial``: the executor's tests time real runs, probe this machine, shape emulated
networks and wait out fault timeouts (module docstring)."""


@pytest.fixture(autouse=True, scope="session")
def _gnnplan_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep presets written by tests and cached statistics out of the user's ~/.gnnplan (one home per pytest-xdist
    worker)."""
    if "GNNPLAN_TEST_KEEP_HOME" not in os.environ:
        home = tmp_path_factory.mktemp("gnnplan-home")
        os.environ["GNNPLAN_HOME"] = str(home)
        os.environ.pop("GNNPLAN_CACHE", None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under :data:`SERIAL_FOLDERS` ``serial`` (module docstring)."""
    tests = Path(__file__).parent
    for item in items:
        if item.path.relative_to(tests).parts[0] in SERIAL_FOLDERS:  # a folder's subfolders too
            item.add_marker(pytest.mark.serial)
