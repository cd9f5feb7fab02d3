"""``__constant__`` memory: what the host fills (``cudaMemcpyToSymbol``) is one more input
of the kernels that read it, a parameter named as the symbol and given in the spec; what the
source gives values to is a constant of the kernel. The original file still runs with its
symbols set (``emulate-original``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.driver.load import load_kernel
from kir.errors import KirError, UnsupportedError
from kir.interp.run import run_kernel
from kir.ir import Const, Launch
from kir.ir.types import I32
from kir.spec import load_spec_text

DATA = Path(__file__).parent / "data"
CONV = DATA / "conv_rows.cu"


def test_constant_memory_read_by_the_kernel_becomes_parameters_after_its_own():
    kernel = load_kernel(CONV).kernel
    assert [(p.name, str(p.type)) for p in kernel.params] == [
        ("d_Dst", "f32* global"), ("d_Src", "f32* global const"), ("imageH", "i32"),
        ("c_width", "i32"), ("c_Kernel", "f32* global const")]


@pytest.mark.parametrize("target", TARGETS)
def test_a_separable_convolution_row_pass_with_its_filter_in_constant_memory(target):
    check_everywhere(CONV, target, [{}, {"W": 70, "H": 7}], seed=3)


def test_constants_with_values_in_the_source_are_the_kernels_own():
    kernel = load_cuda("""
    __constant__ float c_taps[3] = {0.25f, 0.5f, 0.25f};
    __constant__ int c_offset = 1;
    struct Scale { float mul; float add; };
    __constant__ Scale c_scale;
    __global__ void k(float* y, const float* x) {
        for (int i = 0; i < 4; ++i) {
            float s = 0.0f;
            for (int j = 0; j < 3; ++j) s += c_taps[j] * x[i + j];
            y[i] = (s + c_offset) * c_scale.mul + c_scale.add;
        }
    }""", "c.cu")
    assert [p.name for p in kernel.params] == ["y", "x", "c_scale_mul", "c_scale_add"]
    x = np.arange(6, dtype=np.float32)
    out = run_kernel(kernel, {"y": np.zeros(4, np.float32), "x": x, "c_scale_mul": 2.0,
                              "c_scale_add": 0.5}, {})
    want = [(0.25 * x[i] + 0.5 * x[i + 1] + 0.25 * x[i + 2] + 1) * 2 + 0.5 for i in range(4)]
    np.testing.assert_allclose(out["y"], want, rtol=1e-6)


def test_a_constant_the_spec_does_not_give_is_named_at_its_declaration():
    text = (DATA / "conv_rows.kir.toml").read_text().replace(
        'c_Kernel = { dtype = "f32", shape = [9] }\n', "")
    spec = load_spec_text(text, DATA / "conv_rows.kir.toml")
    with pytest.raises(KirError, match="takes the buffer 'c_Kernel'") as info:
        load_kernel(CONV, spec_path=spec)
    assert (info.value.loc.file, info.value.loc.line) == (str(CONV), 8)
    assert "c_Kernel = { dtype" in info.value.hint


def test_constant_memory_kir_cannot_pass_is_refused_where_it_is_declared():
    with pytest.raises(UnsupportedError, match="__constant__ pointer"):
        load_cuda("__constant__ float* c_p;\n__global__ void k(float* y) { y[0] = c_p[0]; }",
                  "c.cu")
    with pytest.raises(UnsupportedError, match="__constant__ memory"):
        load_cuda("__global__ void k(float* y) { __constant__ float c[2]; y[0] = c[0]; }",
                  "c.cu")


def test_spec_init_drafts_the_constant_memory_a_kernel_reads(tmp_path):
    from kir.driver.spec_draft import draft_spec

    source = tmp_path / "conv.cu"
    source.write_text(CONV.read_text())
    draft = draft_spec(source)
    assert '\nc_Kernel = { dtype = "f32", shape = ["N"] }' in draft.text, draft.text
    assert '\nc_width = { value = "N", dtype = "i32" }' in draft.text, draft.text
    assert any("cudaMemcpyToSymbol" in todo for todo in draft.todos)


def test_device_variables_only_read_are_inputs_or_constants():
    """A ``__device__`` variable the code only reads is read-only data like ``__constant__``
    memory: with values in the source, a constant of the kernel; without, an input the spec
    gives (the host fills it with cudaMemcpyToSymbol)."""
    kernel = load_cuda("""
    __device__ float d_table[4] = {5.0f, 6.0f, 7.0f, 8.0f};
    __device__ float d_scale;
    __global__ void k(float* y, const int* idx) {
        y[threadIdx.x] = d_table[idx[threadIdx.x] & 3] * d_scale;
    }""", "d.cu", launch=Launch(("1", "1", "1"), (4, 1, 1), 0))
    assert [p.name for p in kernel.params] == ["y", "idx", "d_scale"]
    idx = np.arange(4, dtype=np.int32)
    out = run_kernel(kernel, {"y": np.zeros(4, np.float32), "idx": idx, "d_scale": 0.5}, {})
    np.testing.assert_array_equal(out["y"], [2.5, 3.0, 3.5, 4.0])


def test_a_device_variable_the_code_writes_is_the_kernels_own_workspace():
    """A counter every block shares (the samples' retirement count): a buffer the launch
    names (``Launch.scratch``), zero at every launch, rather than a per-thread copy; its
    reads and writes go to element 0 (tests/frontend/test_last_block.py runs such a kernel)."""
    from kir.ir import Atomic

    source = """__device__ unsigned int blocks_done = 0;
__global__ void k(float* y) {
    unsigned int t = atomicAdd(&blocks_done, 1u);
    y[0] = t;
}"""
    kernel = load_cuda(source, "w.cu")
    assert kernel.launch.scratch == (("blocks_done", "1"),)
    assert kernel.param("blocks_done").is_buffer
    atomic = next(n for n in kernel.body.walk() if isinstance(n, Atomic))
    assert atomic.buffer == "blocks_done" and atomic.index == Const(0, I32)


@pytest.mark.parametrize("init, taken", [("{0, 0u, 0, 0}", True), ("", True),
                                         ("{0, 1, 0, 0}", False)])
def test_a_written_device_array_is_workspace_only_from_zeros(init, taken):
    source = f"""__device__ unsigned int counts[4]{' = ' + init if init else ''};
__global__ void k(float* y) {{
    unsigned int t = atomicAdd(&counts[threadIdx.x % 4], 1u);
    y[threadIdx.x] = t;
}}"""
    if taken:
        assert load_cuda(source, "w.cu").launch.scratch == (("counts", "4"),)
    else:
        with pytest.raises(UnsupportedError, match="its start is not zero"):
            load_cuda(source, "w.cu")


def test_a_constant_structs_vector_member_is_refused_for_mlx_at_its_declaration(tmp_path):
    # (was an internal error in the emitter: a float3 parameter has no scalar name)
    from kir.backends import emit

    (tmp_path / "p.cu").write_text(
        "struct Sim { float3 gravity; float damping; };\n__constant__ Sim params;\n"
        "__global__ void k(float* v) {\n"
        "    v[threadIdx.x] = (v[threadIdx.x] + params.gravity.y) * params.damping;\n}\n")
    (tmp_path / "p.kir.toml").write_text(
        'kernel = "k"\nsizes = { N = 32 }\nlaunch = { grid = [1], block = ["N"] }\n[args]\n'
        'v = { dtype = "f32", shape = ["N"], role = "inout" }\n'
        'params_gravity = { value = 0.5, dtype = "f32" }\n'
        'params_damping = { value = 0.9, dtype = "f32" }\n')
    loaded = load_kernel(tmp_path / "p.cu")
    with pytest.raises(UnsupportedError, match="is a f32x3 value") as info:
        emit(loaded.kernel, loaded.bound, "metal")
    assert info.value.loc is not None and info.value.loc.line == 2
