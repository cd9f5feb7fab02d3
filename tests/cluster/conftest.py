"""One local Ray cluster for the tests of this folder (starting one takes ~10 s; it stops
after the folder's last test, so the rest of the suite does not share the cores with it): 2 CPUs
and two units of a fake device resource, as on CI's 2 cores. Tests that need Ray skip with
the reason when it is not installed (`pip install -e ".[ray]"`)."""

from __future__ import annotations

import os
import sys

import pytest

RESOURCE = "fake-gpu"


@pytest.fixture(scope="package")
def ray_cluster():
    ray = pytest.importorskip("ray", reason='Ray is an optional extra: pip install -e ".[ray]"')
    from kir.measure.ray_connect import connect

    # Ray's workers import the test doubles (runners) by the names pytest gave their
    # modules, which live on the test session's sys.path.
    path = os.pathsep.join(p for p in sys.path if p)
    connect(None, num_cpus=2, resources={RESOURCE: 2},
            runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield ray
    ray.shutdown()
