"""Location-free jobs without Ray: what a job carries, what a worker rebuilds from it, the
device handshake, and the in-process executor giving the local pools' results exactly."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest

from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.measure.bundle import SpecBundle
from kir.measure.cases import check_kernel
from kir.measure.device import describe_model
from kir.measure.model import ModelEvaluator, model_validated
from kir.measure.portable import DeviceService, EvalContext, EvalJob, WrongDevice, prepare, validate
from kir.measure.remote import LocalExecutor, RemoteEvaluator
from kir.rules import RuleContext, apply_trace
from kir.search import SearchConfig, search
from kir.search.device import DeviceDescriptor
from kir.search.hints import hints

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIZES = {"rows": 4, "cols": 64}


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(EXAMPLES / "softmax.cu", sizes=SIZES)


def rules_subset():
    """A few rules that apply to softmax: a search spends most of its time matching rules on
    the coordinator, and these tests are about where candidates are judged."""
    registry = load_registry([])
    return {name: registry[name] for name in ("coarsen-threads", "distribute-loop",
                                              "unroll-loop", "resize-block", "exp-to-exp2")}


def history(result):
    """What two searches must agree on. Jobs name source files without their folders, so a
    location in an error reads ``softmax.cu:29:5`` remotely where it names the full path
    locally; and a time rescaled by a race against the best's holder
    (kir.measure.gpu.leads) is the holder's time times a ratio, whose last bits follow the
    order the holders came in: times agree to 12 significant digits."""
    return [(r.genome, r.status, None if r.time_ms is None else float(f"{r.time_ms:.12g}"),
             r.error.replace(f"{EXAMPLES}/", "")) for r in result.history]


def test_a_job_names_no_file_of_the_coordinator(loaded, tmp_path):
    """The context carries the spec's text and the reference's source, not their paths; a
    worker that has never seen the examples folder rebuilds the same cases from it."""
    context = EvalContext.of(loaded, describe_model("apple-m2"))
    blob = pickle.dumps((context, EvalJob.of(context, loaded.kernel)))
    assert str(EXAMPLES).encode() not in blob
    assert context.bundle.reference_name == "refs.py"
    assert "def softmax" in context.bundle.reference_source
    spec_path = context.bundle.materialize(tmp_path)
    assert spec_path.parent == tmp_path / context.bundle.digest
    assert (spec_path.parent / "refs.py").read_text() == (EXAMPLES / "refs.py").read_text()
    assert prepare(context).check.cases[0].expected["y"].shape == (4, 64)


def test_bundle_digest_follows_the_content(loaded):
    bundle = SpecBundle.of(loaded.bound.spec)
    changed = SpecBundle(bundle.spec_name, bundle.spec_text,
                         bundle.reference_name, bundle.reference_source + "\n# edited\n")
    assert bundle.digest == SpecBundle.of(loaded.bound.spec).digest
    assert changed.digest != bundle.digest


def test_candidate_text_must_parse_back_to_its_fingerprint(loaded):
    context = EvalContext.of(loaded, describe_model("apple-m2"))
    job = EvalJob.of(context, loaded.kernel)
    forged = EvalJob(job.context, job.kernel_ir, "0" * 16)
    assert validate(context, job).ok
    verdict = validate(context, forged)
    assert verdict.status == "crash" and "parses back to another kernel" in verdict.error


def test_a_worker_refuses_a_job_built_for_another_device(loaded):
    m1 = DeviceService("model:apple-m1")
    assert m1.describe() == DeviceDescriptor("model:apple-m1", "model:apple-m1", "",
                                             m1.describe().kir, "")
    context = EvalContext.of(loaded, describe_model("apple-m3"))
    job = EvalJob.of(context, loaded.kernel)
    with pytest.raises(WrongDevice, match="model:apple-m3"):
        m1.measure(context, job, validate(context, job))
    newer = DeviceDescriptor("Apple M2", "metal", "0.31.0", "0.1.0", "macOS 15.1 arm64")
    older = DeviceDescriptor("Apple M2", "metal", "0.30.0", "0.1.0", "macOS 15.1 arm64")
    assert newer.mismatch(older) == "mlx '0.31.0' != '0.30.0'"
    assert newer.mismatch(newer) is None


def test_model_split_gives_the_verdict_of_one_check(loaded):
    """Validation on one worker and the model's count on another make exactly the verdict
    check_kernel gives with the profile in one process (details included)."""
    registry = load_registry([])
    ctx = RuleContext(sizes=dict(SIZES))
    kernels = [loaded.kernel] + [apply_trace(loaded.kernel, hint.steps, registry, ctx).kernel
                                 for hint in hints(loaded.kernel, registry, ctx)]
    assert len({k.fingerprint() for k in kernels}) >= 3
    with ModelEvaluator(loaded, "apple-m2", workers=1) as local:
        context = EvalContext.of(loaded, local.descriptor)
        check = prepare(context).check
        for kernel in kernels:
            job = EvalJob.of(context, kernel)
            split = model_validated(kernel, check, validate(context, job), "apple-m2")
            assert split == check_kernel(kernel, local.context)


def test_in_process_executor_matches_the_local_pool(loaded):
    registry = rules_subset()
    ctx = RuleContext(sizes=dict(SIZES))
    config = SearchConfig(budget=8, seed=3)
    with ModelEvaluator(loaded, "apple-m2", workers=1) as local:
        expected = search(loaded.kernel, registry, local, ctx, config)
    with RemoteEvaluator(loaded, LocalExecutor("model:apple-m2", workers=1)) as remote:
        assert remote.device == local.device and remote.time_sizes == local.time_sizes
        found = search(loaded.kernel, registry, remote, ctx, config)
    assert history(found) == history(expected)
    assert len(found.history) == 8 and found.best_ms == expected.best_ms


def test_bundle_without_reference_and_a_missing_module(tmp_path):
    shutil.copy(EXAMPLES / "softmax.cu", tmp_path / "k.cu")
    text = (EXAMPLES / "softmax.kir.toml").read_text()
    (tmp_path / "k.kir.toml").write_text(text.replace('reference = "refs:softmax"\n', ""))
    plain = load_kernel(tmp_path / "k.cu", sizes=SIZES)
    bundle = SpecBundle.of(plain.bound.spec)
    assert bundle.reference_name == "" and bundle.reference_source == ""
    context = EvalContext.of(plain, describe_model("apple-m2"))
    assert validate(context, EvalJob.of(context, plain.kernel)).ok  # the kernel's own outputs
