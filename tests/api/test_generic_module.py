"""The drop-in module (issue 13): a generated module, imported from its file, called at three
shapes and two dtypes with MLX's custom kernels running on kir's CPU emulator; its MLX
fallback, its size constraints, its VJP slot, specialized and tuned variants and warm-up."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from kir.backends.emulate import emulator_available

import kir
from kir.api.modules import build_module
from kir.driver.registry import load_registry
from kir.search import Evaluation, TuningDB, TuningKey

from . import emulated_mlx

DATA = Path(__file__).parent / "data"
AVAILABLE, REASON = emulator_available()
needs_emulator = pytest.mark.skipif(not AVAILABLE, reason=f"CPU emulator unavailable: {REASON}")
SHAPES = [(8, 200), (3, 77), (16, 512)]


def import_module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rmsnorm_numpy(x: np.ndarray, w: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    x64 = x.astype(np.float64)
    return x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps) * w


@pytest.fixture(scope="module")
def rmsnorm_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("module") / "rmsnorm_kir.py"
    # bf16 too would be right on MLX, but the CPU emulator has no bfloat16 yet
    kir.load(DATA / "rmsnorm.cu").module_build(dtypes=("f32", "f16")).write(path)
    return path


@needs_emulator
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{r}x{c}" for r, c in SHAPES])
def test_generated_module_at_three_shapes_and_two_dtypes(rmsnorm_path, monkeypatch, shape,
                                                         dtype):
    built = emulated_mlx.install(monkeypatch)
    module = import_module(rmsnorm_path)
    rng = np.random.default_rng(1)
    x = rng.uniform(-3, 3, shape).astype(np.float32)
    w = rng.uniform(-1, 1, shape[1]).astype(np.float32)
    y = module.rmsnorm(mx.array(x).astype(dtype), mx.array(w).astype(dtype))
    assert y.dtype == dtype and y.shape == shape
    assert len(built) == 1 and built[0].calls == 1  # the GPU kernel ran, not the fallback
    xs, ws = (np.array(mx.array(a).astype(dtype).astype(mx.float32)) for a in (x, w))
    tolerance = 1e-5 if dtype == mx.float32 else 1e-2
    np.testing.assert_allclose(np.array(y.astype(mx.float32)), rmsnorm_numpy(xs, ws),
                               rtol=tolerance, atol=tolerance)
    chosen = module.choose({"rows": shape[0], "cols": shape[1]},
                           {"x": str(dtype).split(".")[-1], "w": str(dtype).split(".")[-1]},
                           [mx.array(x).astype(dtype), mx.array(w).astype(dtype)])
    assert chosen["dtypes"]["x"] == str(dtype).split(".")[-1]


def test_without_a_device_the_mlx_reference_answers(rmsnorm_path, monkeypatch):
    monkeypatch.setattr(mx.metal, "is_available", lambda: False)
    module = import_module(rmsnorm_path)
    x = np.linspace(-2, 2, 5 * 33, dtype=np.float32).reshape(5, 33)
    w = np.linspace(0.5, 1.5, 33, dtype=np.float32)
    y = module.rmsnorm(mx.array(x), mx.array(w))
    np.testing.assert_allclose(np.array(y), rmsnorm_numpy(x, w), rtol=1e-5, atol=1e-6)
    half = module.rmsnorm(mx.array(x).astype(mx.float16), mx.array(w).astype(mx.float16))
    assert half.dtype == mx.float16  # the output follows T, as the kernel's would
    with pytest.raises(ValueError, match=r"w.shape\[0\] = 32 but x.shape\[1\] = 33"):
        module.rmsnorm(mx.array(x), mx.array(w[:32]))


def test_a_gradient_can_be_attached(rmsnorm_path, monkeypatch):
    monkeypatch.setattr(mx.metal, "is_available", lambda: False)
    module = import_module(rmsnorm_path)

    @module.rmsnorm.vjp
    def rmsnorm_vjp(primals, cotangents, outputs):  # a stand-in gradient: d/dx = 3, d/dw = 0
        x, w = primals
        return 3 * mx.ones_like(x), mx.zeros_like(w)

    x, w = mx.ones((2, 4)), mx.ones((4,))
    grad = mx.grad(lambda a: module.rmsnorm(a, w).sum())(x)
    np.testing.assert_array_equal(np.array(grad), np.full((2, 4), 3.0))


def test_the_module_holds_the_spec_requirements(tmp_path, monkeypatch):
    text = (DATA / "rmsnorm.kir.toml").read_text().replace(
        'reference_mlx = "refs:rmsnorm_mlx"', 'reference_mlx = "refs:rmsnorm_mlx"\n'
                                              'require = ["cols % 4 == 1"]')
    (tmp_path / "refs.py").write_text((DATA / "refs.py").read_text())
    (tmp_path / "rmsnorm.cu").write_text((DATA / "rmsnorm.cu").read_text())
    (tmp_path / "rmsnorm.kir.toml").write_text(text.replace("cols = 200 }", "cols = 201 }")
                                               .replace("cols = 77 }", "cols = 81 }"))
    built = emulated_mlx.install(monkeypatch)
    path = kir.load(tmp_path / "rmsnorm.cu").module_build().write(tmp_path / "m.py")
    module = import_module(path)
    x, w = mx.ones((2, 8)), mx.ones((8,))  # cols = 8 breaks the requirement: fallback
    np.testing.assert_allclose(np.array(module.rmsnorm(x, w)), 1.0, rtol=1e-5)
    assert built == []  # no kernel was even built


def test_a_specialized_kernel_runs_only_at_its_sizes(tmp_path):
    """A winner a rule specialized sits in front of the general kernel and is chosen only
    at the sizes it was validated at."""
    k = kir.load(DATA / "rmsnorm.cu")
    winner = dataclasses.replace(k.ir, launch=dataclasses.replace(k.ir.launch,
                                                                  specialized=True))
    build = build_module(k.loaded, kernel=winner, device="Apple M9", time_ms=0.5)
    assert [v.exact for v in build.variants[:2]] == [True, False]
    module = build.load()
    module._DEVICE[:] = ["Apple M9"]  # the chip it was tuned on
    dtypes = {"x": "float32", "w": "float32"}
    at = module.choose({"rows": 8, "cols": 200}, dtypes, [mx.ones((8, 200)), mx.ones((200,))])
    other = module.choose({"rows": 8, "cols": 64}, dtypes, [mx.ones((8, 64)), mx.ones((64,))])
    assert at["exact"] and at["label"].startswith("searched winner")
    assert not other["exact"] and other["label"].startswith("general kernel")


def test_the_tuning_database_gives_a_dispatch_table(tmp_path):
    """Winners stored for other chips and sizes become variants, chosen on that chip nearest
    in size; elsewhere the general kernel runs."""
    from kir.api.searching import validation_fingerprint

    k = kir.load(DATA / "rmsnorm.cu")
    registry = load_registry()
    validation = validation_fingerprint(k.loaded, registry)
    db_path = tmp_path / "t.db"
    with TuningDB(db_path) as db:
        for device, cols, ms in (("Apple M9", 4096, 0.2), ("Apple M7", 200, 0.3)):
            at = k.with_sizes(cols=cols)
            key = TuningKey.make(at.ir.fingerprint(), at.sizes, "metal", device,
                                 kernel_name="rmsnorm", validation=validation)
            db.record(key, at.ir.fingerprint(), [], Evaluation.timed(ms))
    build = build_module(k.loaded, registry=registry, db_path=db_path)
    labels = [v.label for v in build.variants if v.emitted.kernel_name == "rmsnorm"
              and "(f" not in v.label and "(bf" not in v.label]
    assert any("tuned on Apple M9 at rows=8, cols=4096" in label for label in labels)
    module = build.load()
    module._DEVICE[:] = ["Apple M9"]
    dtypes = {"x": "float32", "w": "float32"}
    chosen = module.choose({"rows": 8, "cols": 3000}, dtypes,
                           [mx.ones((8, 3000)), mx.ones((3000,))])
    assert chosen["device"] == "Apple M9" and chosen["sizes"]["cols"] == 4096
    module._DEVICE[:] = ["Apple M1"]
    chosen = module.choose({"rows": 8, "cols": 3000}, dtypes,
                           [mx.ones((8, 3000)), mx.ones((3000,))])
    assert chosen["device"] is None  # untuned here: the general kernel, not another chip's


@needs_emulator
def test_warmup_builds_and_runs_every_variant(rmsnorm_path, monkeypatch):
    built = emulated_mlx.install(monkeypatch)
    module = import_module(rmsnorm_path)
    assert module.warmup() == len(module.VARIANTS) == 2  # f32 and f16
    assert sum(k.calls for k in built) == 2
    assert json.dumps([v["sizes"] for v in module.VARIANTS])  # plain data, printable


@needs_emulator
def test_the_cuda_module_too(tmp_path, monkeypatch):
    """The CUDA-target module (mx.fast.cuda_kernel) at another shape, both dtypes."""
    built = emulated_mlx.install(monkeypatch)
    path = kir.load(DATA / "rmsnorm.cu").module_build("cuda", dtypes=("f32", "f16")) \
        .write(tmp_path / "rmsnorm_cuda.py")
    module = import_module(path)
    assert module.TARGET == "cuda"
    x = np.random.default_rng(3).uniform(-3, 3, (5, 300)).astype(np.float32)
    w = np.ones(300, np.float32)
    for dtype, tolerance in ((mx.float32, 1e-5), (mx.float16, 1e-2)):
        y = module.rmsnorm(mx.array(x).astype(dtype), mx.array(w).astype(dtype))
        xs = np.array(mx.array(x).astype(dtype).astype(mx.float32))
        np.testing.assert_allclose(np.array(y.astype(mx.float32)), rmsnorm_numpy(xs, w),
                                   rtol=tolerance, atol=tolerance)
    assert len(built) == 2 and all(k.calls == 1 for k in built)


def test_choose_answers_without_arrays_and_refuses_what_does_not_fit():
    module = kir.load(DATA / "rmsnorm.cu").module_build(dtypes=("f32",)).load()
    assert module.choose({"rows": 2, "cols": 9}, {"x": "float32", "w": "float32"}) is not None
    assert module.choose({"rows": 2, "cols": 9}, {"x": "float16", "w": "float16"}) is None


@needs_emulator
def test_a_grid_stride_reduced_winner_in_the_module(monkeypatch):
    """grid-stride-reduce's launch (``min(blocks, old grid)``) and its old grid computed at
    run time work in the drop-in module at sizes other than the one it was rewritten at,
    below and above the block count (CUDA and Metal modules on the emulator)."""
    from kir.driver.load import load_kernel
    from kir.rules import apply_trace, context_for, parse_step

    examples = Path(__file__).resolve().parents[2] / "examples"
    loaded = load_kernel(examples / "reduce.cu", sizes={"n": 40000})  # 79 blocks
    registry = load_registry(plugins=False)
    steps = [parse_step("grid-stride-reduce{dim=x,blocks=16}", registry)]
    winner = apply_trace(loaded.kernel, steps, registry, context_for(loaded)).kernel
    assert winner.launch.grid[0].startswith("min(16, ")
    for target in ("cuda", "metal"):
        built = emulated_mlx.install(monkeypatch)
        module = build_module(loaded, target=target, kernel=winner, steps=steps,
                              registry=registry).load()
        for n in (40000, 3000, 123457):  # 79, 6 and 242 former blocks
            chosen = module.choose({"n": n}, {"in": "float32"}, [mx.ones((n,))])
            assert chosen["label"].startswith("searched winner")  # not a fallback
            x = np.random.default_rng(n).uniform(-1, 1, n).astype(np.float32)
            total = np.array(module.reduce_sum(mx.array(x))).reshape(-1)[0]
            assert abs(total - x.astype(np.float64).sum()) < 1e-3 * max(1.0, n ** 0.5), \
                (target, n)
        assert built and all(k.calls >= 1 for k in built)
