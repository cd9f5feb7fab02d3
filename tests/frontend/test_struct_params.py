"""Kernel parameters of struct type, passed by value (``RopeParams p``), as inference engines
pass their launch settings: one scalar argument per field (``p_head_dim``, nested structs
flattened), named in the spec as ``p.head_dim = { ... }`` or ``p_head_dim = { ... }``, and
the original kernel still run with the struct itself (``emulate-original``). Pointer
members (the CUDA programming guide's ``Matrix { width, height, stride, elements }``) are
buffers, and struct locals hold pointers as pointer variables. Also ``sincosf(x, &s, &c)``,
which such kernels use."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from kir.backends.emulate import emulator_available
from kir.frontends.cuda import kernel_params, load_cuda

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target
from kir.errors import KirError, UnsupportedError
from kir.interp.run import run_kernel
from kir.spec import load_spec_text

DATA = Path(__file__).parent / "data"
ROPE = DATA / "rope_params.cu"
MATRIX = DATA / "matrix_struct.cu"


def test_fields_become_scalar_parameters_in_order():
    loaded = load_kernel(ROPE)
    assert [(p.name, str(p.type)) for p in loaded.kernel.params] == [
        ("x", "f32* global restrict"), ("p_tokens", "i32"), ("p_heads", "i32"),
        ("p_head_dim", "i32"), ("p_position_offset", "i32"), ("p_rotary_theta", "f32"),
        ("p_rotary_rotary_dim", "i32")]
    written = {p.name: p for p in kernel_params(ROPE.read_text(), str(ROPE))}
    assert [f for f, _ in written["p"].fields] == [p.name for p in loaded.kernel.params[1:]]
    assert written["p"].layout[-1] == ("rotary", (("theta", "f32"), ("rotary_dim", "i32")))


@pytest.mark.parametrize("target", ["interp", "emulate-cuda", "emulate-metal",
                                    "emulate-original"])
def test_rope_with_a_parameter_struct_matches_numpy(target):
    """At the spec's sizes, its ragged ones, and with the rotary width clamped by the
    kernel's write to its own copy of the struct (R > D)."""
    if target != "interp" and not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    for sizes in ({}, {"T": 5}, {"R": 20}):
        loaded = load_kernel(ROPE, sizes=sizes)
        outcome = check_on_target(loaded, target, seed=1)
        assert outcome.result.ok, (sizes, outcome.result.describe())


@pytest.mark.parametrize("target", ["interp", "emulate-cuda", "emulate-metal",
                                    "emulate-original"])
def test_matrices_as_structs_with_element_pointers_multiply(target):
    """Sub-matrices made by a helper returning a struct that points into its parent, read
    and written through helpers taking the struct by value; the original kernel gets the
    three structs with the buffers' addresses written into them."""
    if target != "interp" and not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    loaded = load_kernel(MATRIX)
    assert [p.name for p in loaded.kernel.params if p.is_buffer] == [
        "A_elements", "B_elements", "C_elements"]
    outcome = check_on_target(loaded, target, seed=2)
    assert outcome.result.ok, outcome.result.describe()


def test_rules_read_the_struct_gemm_as_the_tiled_matmul_it_is():
    """The struct copies of each sub-matrix (width, height, stride, elements at every
    by-value argument and return) are gone from the IR, so the k-tile loop only loads its
    two tiles and multiplies: warp-tile-matmul applies, and the result stays right."""
    from kir.driver.registry import load_registry
    from kir.rules import apply_trace, context_for, parse_step

    loaded = load_kernel(MATRIX)
    written = {n.name for n in loaded.kernel.walk() if type(n).__name__ in ("Declare",
                                                                             "Assign")}
    assert not {n for n in written if "width" in n or "height" in n}, written
    registry = load_registry()
    ctx = context_for(loaded)
    tiled = apply_trace(loaded.kernel, [parse_step("warp-tile-matmul{loop=L1}", registry)],
                        registry, ctx, strict=True).kernel
    import dataclasses

    outcome = check_on_target(dataclasses.replace(loaded, kernel=tiled), "interp", seed=1)
    assert outcome.result.ok, outcome.result.describe()


def test_a_pointer_member_keeps_one_buffer():
    source = """
    struct View { float* data; int n; };
    __global__ void k(float* x, float* y, int flip) {
        View v = {x, 4};
        if (flip) v.data = y;
        v.data[0] = 1.0f;
    }"""
    with pytest.raises(UnsupportedError, match="two buffers") as info:
        load_cuda(source, "s.cu")
    assert info.value.loc.line == 5
    moved = load_cuda("""
    struct View { float* data; int n; };
    __global__ void k(float* x) {
        View v = {x + 2, 4};
        v.data += 1;
        View w = v;
        w.data[v.n - 4] = 5.0f;
    }""", "s.cu")
    out = run_kernel(moved, {"x": np.zeros(6, np.float32)}, {})
    np.testing.assert_array_equal(out["x"], [0, 0, 0, 5, 0, 0])


def test_dotted_and_flat_field_names_are_the_same_arguments():
    text = (DATA / "rope_params.kir.toml").read_text()
    flat = text.replace("p.rotary.", "p_rotary_").replace("p.", "p_")
    dotted_spec = load_spec_text(text, DATA / "rope_params.kir.toml")
    flat_spec = load_spec_text(flat, DATA / "rope_params.kir.toml")
    assert dotted_spec.args == flat_spec.args
    assert "p_rotary_theta" in dotted_spec.args
    both = text + 'p_heads = { value = "H", dtype = "i32" }\n'
    with pytest.raises(KirError, match="'p_heads' given twice"):
        load_spec_text(both, DATA / "rope_params.kir.toml")


def test_a_field_the_spec_leaves_out_is_named():
    text = (DATA / "rope_params.kir.toml").read_text().replace(
        'p.position_offset = { value = "3", dtype = "i32" }\n', "")
    spec_path = DATA / "rope_missing.kir.toml"
    spec = load_spec_text(text, spec_path)
    with pytest.raises(KirError, match="p_position_offset"):
        check_on_target(load_kernel(ROPE, spec_path=spec), "interp")


def test_a_struct_argument_reads_and_writes_like_the_struct():
    """Read through a helper taking the struct by const reference, a nested member written
    on the kernel's own copy: the parameters themselves are never assigned."""
    kernel = load_cuda("""
    struct Inner { float scale; int shift; };
    struct Args { int n; Inner in; };
    __device__ float apply(const Args& a, float v) { return v * a.in.scale + a.in.shift; }
    __global__ void k(float* y, Args a) {
        a.in.shift += 1;
        for (int i = 0; i < a.n; ++i) y[i] = apply(a, (float)i);
    }""", "s.cu")
    assert [p.name for p in kernel.params] == ["y", "a_n", "a_in_scale", "a_in_shift"]
    out = run_kernel(kernel, {"y": np.zeros(8, np.float32), "a_n": 5, "a_in_scale": 2.0,
                              "a_in_shift": 3}, {})
    np.testing.assert_array_equal(out["y"], [4, 6, 8, 10, 12, 0, 0, 0])


def test_struct_parameters_kir_cannot_pass_are_refused_at_the_parameter():
    with pytest.raises(UnsupportedError, match="array member 'a_w'") as info:
        load_cuda("struct A { float w[4]; };\n__global__ void k(float* y, A a) "
                  "{ y[0] = a.w[0]; }", "s.cu")
    assert (info.value.loc.line, info.value.loc.col) == (2, 29)
    with pytest.raises(UnsupportedError, match="already has"):
        load_cuda("struct A { float w; };\n__global__ void k(float* a_w, A a) "
                  "{ a_w[0] = a.w; }", "s.cu")
    with pytest.raises(UnsupportedError, match="not all of one scalar type"):
        load_cuda("struct A { float w; int n; };\n__global__ void k(float* y, A* a) "
                  "{ y[0] = a->w; }", "s.cu")
    with pytest.raises(UnsupportedError, match="pointer member 'p'"):
        load_cuda("struct A { float* p; };\n__global__ void k(float* y) "
                  "{ __shared__ A s[4]; y[0] = 0.0f; }", "s.cu")


def test_sincos_writes_both_outputs_from_the_input_read_once():
    kernel = load_cuda("""
    __global__ void k(float* y, double* z) {
        float a = y[0], c;
        sincosf(a, &a, &c);   // the input is also an output
        y[0] = a; y[1] = c;
        __sincosf(y[2], &y[2], y + 3);
        double s2, c2;
        sincos(z[0], &s2, &c2);
        z[0] = s2; z[1] = c2;
    }""", "s.cu")
    out = run_kernel(kernel, {"y": np.array([0.5, 0, 1.0, 0], np.float32),
                              "z": np.array([0.25, 0], np.float64)}, {})
    np.testing.assert_allclose(out["y"], [np.sin(0.5), np.cos(0.5), np.sin(1.0), np.cos(1.0)],
                               rtol=1e-6)
    np.testing.assert_allclose(out["z"], [np.sin(0.25), np.cos(0.25)], rtol=1e-12)


def test_spec_init_drafts_one_argument_per_field(tmp_path):
    from kir.driver.spec_draft import draft_spec

    source = tmp_path / "rope.cu"
    source.write_text(ROPE.read_text())
    draft = draft_spec(source)
    for name in ("p_tokens", "p_rotary_theta", "p_rotary_rotary_dim"):
        assert f"\n{name} = " in draft.text, draft.text
    assert '\np_rotary_theta = { value = "N", dtype = "f32" }' in draft.text
    assert any("field tokens of the struct p" in todo for todo in draft.todos)
    spec = load_spec_text(draft.text, tmp_path / "rope.kir.toml")
    assert load_kernel(source, spec_path=spec).kernel.params[1].name == "p_tokens"
    matrices = tmp_path / "matrix.cu"
    matrices.write_text(MATRIX.read_text())
    text = draft_spec(matrices).text
    assert '\nC_elements = { dtype = "f32", shape = ["N"], role = "out" }' in text, text
    assert '\nA_stride = { value = "N", dtype = "i32" }' in text, text


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_rope_emitted_for_cuda_compiles_with_nvcc(tmp_path):
    from kir.backends import emit
    from tests.nvcc_build import nvcc_sm90

    loaded = load_kernel(ROPE)
    nvcc_sm90(emit(loaded.kernel, loaded.bound, "cuda"), tmp_path, assemble=False)


def test_a_grid_constant_struct_parameter_is_an_ordinary_one():
    # CUDA 11.7's __grid_constant__ (a const parameter read in place): the same fields
    source = ("struct Params { float scale; int n; };\n"
              "__global__ void k(const __grid_constant__ Params p, const float* x, float* y) {\n"
              "    int i = threadIdx.x;\n    if (i < p.n) y[i] = x[i] * p.scale;\n}\n")
    from kir.interp import run_kernel
    from kir.ir import Launch

    kernel = load_cuda(source, "g.cu", launch=Launch(("1", "1", "1"), (8, 1, 1), 0))
    assert [p.name for p in kernel.params] == ["p_scale", "p_n", "x", "y"]
    out = run_kernel(kernel, {"p_scale": np.float32(2.0), "p_n": 5,
                              "x": np.arange(8, dtype=np.float32),
                              "y": np.zeros(8, np.float32)}, {})["y"]
    assert out.tolist() == [0, 2, 4, 6, 8, 0, 0, 0]
