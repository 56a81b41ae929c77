"""The skip mark of tests that build an emulated cluster (:mod:`gnnplan.executor.emulate`): they need root with
CAP_NET_ADMIN and the ip, tc, ss and taskset commands."""

from __future__ import annotations

import pytest

from gnnplan.executor import emulate
from gnnplan.executor.emulate import EmulationError


def can_emulate() -> bool:
    """Whether this process may build network namespaces, links and qdiscs."""
    try:
        emulate.check_available()
    except EmulationError:
        return False
    return True


needs_root = pytest.mark.skipif(not can_emulate(), reason="needs root with CAP_NET_ADMIN and ip/tc/ss/taskset")
