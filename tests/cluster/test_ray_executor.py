"""The Ray executor on a local Ray cluster (2 CPUs, two fake device resources): a cost-model
search and an emulator-validated search give exactly the local pools' results for the same
seed and budget; killing a device actor mid-search loses no completed evaluation; a
steady-state search keeps the budget with jobs in flight."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir.driver.load import load_kernel
from kir.errors import KirError
from kir.measure.mlx import MLXEvaluator
from kir.measure.model import ModelEvaluator
from kir.measure.remote import RemoteEvaluator
from kir.rules import RuleContext
from kir.search import SearchConfig, TuningDB, search
from kir.search.engine import default_key

from .conftest import RESOURCE
from .doubles import SteadyClockEmulator
from .test_portable import SIZES, history, rules_subset

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MODEL = SearchConfig(budget=10, seed=1)
EMULATED = SearchConfig(budget=5, seed=2)


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(EXAMPLES / "softmax.cu", sizes=SIZES)


@pytest.fixture(scope="module")
def registry():
    return rules_subset()


@pytest.fixture(scope="module")
def local_model(loaded, registry):
    """The reference: the same search through the local CPU pool."""
    with ModelEvaluator(loaded, "apple-m2", workers=2) as local:
        return search(loaded.kernel, registry, local, RuleContext(sizes=dict(SIZES)), MODEL)


def executor(role: str = "model:apple-m2", **options):
    from kir.measure.ray_executor import RayExecutor

    return RayExecutor(RESOURCE, role, **options)


def test_cost_model_search_on_ray_matches_the_local_pool(ray_cluster, loaded, registry,
                                                         local_model):
    pool = executor()
    assert len(pool.actors) == 2 and pool.descriptor.device == "model:apple-m2"
    with RemoteEvaluator(loaded, pool) as remote:
        found = search(loaded.kernel, registry, remote, RuleContext(sizes=dict(SIZES)), MODEL)
    assert history(found) == history(local_model)
    assert found.best_ms == local_model.best_ms and len(found.history) == MODEL.budget


def test_emulator_validated_search_on_ray_matches_the_local_pools(ray_cluster, loaded,
                                                                  registry):
    """Candidates validated on the interpreter (CPU tasks) and then built, run and checked on
    the CPU emulator of emitted Metal inside the device actors (GPU worker processes, timing
    lock and all); the runner's times depend on the source only, so both searches choose
    alike."""
    ctx = RuleContext(sizes=dict(SIZES))
    with MLXEvaluator(loaded, "metal", runner=SteadyClockEmulator(), warmup=0, repeat=1,
                      workers=2, gpu_workers=1) as local:
        expected = search(loaded.kernel, registry, local, ctx, EMULATED)
    pool = executor("metal", runner=SteadyClockEmulator(), gpu_workers=1)
    assert pool.descriptor.device == local.descriptor.device == "SteadyClockEmulator:metal"
    with RemoteEvaluator(loaded, pool, warmup=0, repeat=1) as remote:
        found = search(loaded.kernel, registry, remote, ctx, EMULATED)
    assert history(found) == history(expected)
    assert sum(r.status == "ok" for r in found.history) >= 2  # timed on the "device"


class KillingExecutor:
    """Ray executor that kills device actor 0 right after handing it its third job."""

    @staticmethod
    def make():
        from kir.measure.ray_executor import RayExecutor

        class Killing(RayExecutor):
            handed = 0

            def _launch(self, entry):
                ref = super()._launch(entry)
                if entry.kind == "measure" and entry.actor == 0:
                    self.handed += 1
                    if self.handed == 3:
                        self._ray.kill(self.actors[0], no_restart=False)
                return ref

        return Killing(RESOURCE, "model:apple-m2")


def test_killing_an_actor_mid_search_loses_no_completed_evaluation(ray_cluster, loaded,
                                                                   registry, local_model,
                                                                   tmp_path):
    pool = KillingExecutor.make()
    with TuningDB(tmp_path / "tuning.db") as db, RemoteEvaluator(loaded, pool) as remote:
        key = default_key(loaded.kernel, remote, SIZES)
        found = search(loaded.kernel, registry, remote, RuleContext(sizes=dict(SIZES)),
                       MODEL, db, key=key)
        rows = {row.fingerprint: row.evaluation for row in db.rows(key)}
    assert pool.handed >= 3 and pool.lost >= 1  # a job was on the killed actor
    assert found.stopped == "budget" and len(found.history) == MODEL.budget
    assert history(found) == history(local_model)  # resent jobs, the same verdicts
    assert {r.fingerprint for r in found.history} == set(rows)
    assert all(rows[r.fingerprint].status == r.status for r in found.history)


def test_steady_state_search_on_ray_keeps_the_budget(ray_cluster, loaded, registry):
    pool = executor()
    with RemoteEvaluator(loaded, pool) as remote:
        assert remote.capacity == 2 + 2  # two CPUs, two device actors
        found = search(loaded.kernel, registry, remote, RuleContext(sizes=dict(SIZES)),
                       SearchConfig(strategy="steady", budget=12, seed=1))
    assert found.stopped == "budget" and len(found.history) == 12
    assert found.evaluator_calls == 12 and found.best_ms is not None


def test_a_resource_nobody_offers_says_how_to_start_workers(ray_cluster):
    from kir.measure.ray_executor import RayExecutor

    with pytest.raises(KirError, match="no node of the Ray cluster offers") as caught:
        RayExecutor("apple-m9-ultra", "model:apple-m2")
    assert "ray start" in caught.value.hint
