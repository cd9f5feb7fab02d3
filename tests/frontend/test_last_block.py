"""A one-launch reduction finished by the last block (tests/frontend/data/last_block_sum.cu):
``__threadfence()``, a ticket from an atomic counter, a flag in shared memory that every
thread branches on (barriers inside the branch), and workspace buffers declared with the
spec role ``scratch``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from everywhere import TARGETS, check_everywhere

from kir.backends import emit
from kir.backends.emulate import emulator_available
from kir.backends.module import write_module
from kir.driver.load import load_kernel
from kir.errors import KirError
from kir.ir import Fence
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.spec import load_spec

LAST_BLOCK = Path(__file__).parent / "data" / "last_block_sum.cu"
# The same pattern with the count of finished blocks in a __device__ variable.
RETIRE_COUNT = Path(__file__).parent / "data" / "retire_count_sum.cu"
# In a vendor sample's style: templates, shared memory through a conversion operator,
# cooperative groups, atomicInc on a __device__ count.
SINGLE_PASS = Path(__file__).parent / "data" / "single_pass_sum.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_last_block_sum_on_every_target(target):
    check_everywhere(LAST_BLOCK, target, [{}, {"N": 777, "BLOCKS": 5}, {"N": 40, "BLOCKS": 3}],
                     seed=21)


@pytest.mark.parametrize("target", TARGETS)
def test_a_device_counter_becomes_the_kernels_own_workspace(target):
    """A written __device__ variable is a buffer the launch names (zero at every launch,
    not in the spec); the original file, run by the emulator, keeps it as CUDA does."""
    check_everywhere(RETIRE_COUNT, target, [{}, {"N": 100000}, {"N": 700}], seed=22)


@pytest.mark.parametrize("target", TARGETS)
def test_a_single_pass_sum_in_a_samples_style_on_every_target(target):
    check_everywhere(SINGLE_PASS, target, [{}, {"N": 3001, "G": 5}, {"N": 513, "G": 2}],
                     seed=23)


def test_the_device_counter_is_a_scratch_parameter_of_the_launch():
    kernel = load_kernel(RETIRE_COUNT).kernel
    assert kernel.launch.scratch == (("blocks_done", "1"),)
    assert kernel.param("blocks_done").type.elem.name == "u32"


def test_a_device_variable_written_from_a_nonzero_start_is_refused(tmp_path):
    source = RETIRE_COUNT.read_text().replace("blocks_done = 0;\n\n", "blocks_done = 3;\n\n", 1)
    path = tmp_path / "retire_count_sum.cu"
    path.write_text(source)
    (tmp_path / "retire_count_sum.kir.toml").write_text(
        RETIRE_COUNT.with_suffix(".kir.toml").read_text())
    with pytest.raises(KirError, match="its start is not zero") as info:
        load_kernel(path)
    assert info.value.loc.line == 8 and "start 'blocks_done' at 0" in info.value.hint


def test_the_fence_is_a_statement_both_targets_print():
    loaded = load_kernel(LAST_BLOCK)
    fences = [n for n in loaded.kernel.body.walk() if isinstance(n, Fence)]
    assert [f.scope for f in fences] == ["device"]
    assert fences[0].loc.line == 33
    text = print_kernel(loaded.kernel)
    assert "fence device" in text and parse_kernel(text) == loaded.kernel
    cuda = emit(loaded.kernel, loaded.bound, "cuda").source
    metal = emit(loaded.kernel, loaded.bound, "metal").source
    assert "__threadfence();" in cuda
    assert "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, " \
           "thread_scope_device);" in metal


def test_scratch_buffers_are_zeroed_inputs_never_outputs():
    bound = load_kernel(LAST_BLOCK).bound
    assert bound.outputs == ["total"]
    inputs = bound.make_inputs(0)
    assert not inputs["partials"].any() and inputs["tickets"].dtype == np.uint32


def test_a_scratch_buffer_cannot_start_from_data(tmp_path):
    spec = LAST_BLOCK.with_suffix(".kir.toml").read_text().replace(
        'role = "scratch" }', 'role = "scratch", init = "input" }', 1)
    path = tmp_path / "bad.kir.toml"
    path.write_text(spec)
    with pytest.raises(KirError, match="a scratch buffer starts at a number"):
        load_spec(path)


@pytest.mark.skipif(not emulator_available(), reason="no host C++ compiler for the emulator")
def test_the_mlx_module_returns_the_total_only(tmp_path):
    """The module a user imports: scratch buffers are the kernel's business (MLX outputs
    filled with init_value), and the call returns the spec's outputs alone."""
    from kir.emulate.patch import emulate_metal_kernels

    loaded = load_kernel(LAST_BLOCK, sizes={"N": 3000, "BLOCKS": 7})
    emitted = emit(loaded.kernel, loaded.bound, "metal")
    path = write_module(emitted, tmp_path / "last_block_mod.py", loaded.bound.spec)
    x = np.random.default_rng(3).uniform(-1, 1, 3000).astype(np.float32)
    with emulate_metal_kernels(force=True):
        spec = importlib.util.spec_from_file_location("last_block_mod", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        total = module.last_block_sum(mx.array(x))
        again = module.last_block_sum(mx.array(x))
    assert isinstance(total, mx.array) and total.shape == (1,)
    np.testing.assert_allclose(np.array(total)[0], x.sum(dtype=np.float64), rtol=1e-5)
    np.testing.assert_array_equal(np.array(again), np.array(total))


def test_atomic_inc_wraps_at_its_limit(tmp_path):
    """atomicInc(p, limit): the old value o becomes o >= limit ? 0 : o + 1 (CUDA's own call;
    on Metal a compare-and-swap loop). Every thread of two blocks takes a ticket wrapping
    at 5."""
    from kir.interp.run import run_kernel

    (tmp_path / "f.cu").write_text(
        "__global__ void f(unsigned* tickets, unsigned* out) {\n"
        "    out[blockIdx.x * 32 + threadIdx.x] = atomicInc(tickets, 5u);\n}\n")
    (tmp_path / "f.kir.toml").write_text(
        'kernel = "f"\nsizes = { B = 2 }\nlaunch = { grid = ["B"], block = [32] }\n[args]\n'
        'tickets = { dtype = "u32", shape = [1], role = "scratch" }\n'
        'out = { dtype = "u32", shape = ["B * 32"], role = "out", init = "none" }\n')
    loaded = load_kernel(tmp_path / "f.cu")
    out = run_kernel(loaded.kernel, {"tickets": np.zeros(1, np.uint32),
                                     "out": np.zeros(64, np.uint32)}, {"B": 2})
    assert sorted(out["out"].tolist()) == sorted(i % 6 for i in range(64))
    assert out["tickets"][0] == 64 % 6
    assert "atomicInc(&tickets[0], 5u)" in emit(loaded.kernel, loaded.bound, "cuda").source
    metal = emit(loaded.kernel, loaded.bound, "metal")
    assert "kir_atomic_inc(" in metal.source and "atomic_compare_exchange_weak" in metal.header


def test_atomic_dec_is_refused_with_what_to_use():
    from kir.frontends.cuda import load_cuda
    from kir.ir import Launch

    source = ("__global__ void f(unsigned* tickets, unsigned* out) {\n"
              "    out[0] = atomicDec(tickets, gridDim.x);\n}\n")
    with pytest.raises(KirError, match="atomicDec not supported") as info:
        load_cuda(source, "f.cu", launch=Launch(("4", "1", "1"), (32, 1, 1), 0))
    assert info.value.loc.line == 2 and "atomicInc" in info.value.hint
