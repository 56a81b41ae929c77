"""Shared test setup: DGL's backend, and a private gnnplan home/cache per test session."""

from __future__ import annotations

import os

os.environ.setdefault("DGLBACKEND", "pytorch")

import pytest


@pytest.fixture(autouse=True, scope="session")
def _gnnplan_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep presets written by tests and cached statistics out of the user's ~/.gnnplan."""
    if "GNNPLAN_TEST_KEEP_HOME" not in os.environ:
        home = tmp_path_factory.mktemp("gnnplan-home")
        os.environ["GNNPLAN_HOME"] = str(home)
        os.environ.pop("GNNPLAN_CACHE", None)
