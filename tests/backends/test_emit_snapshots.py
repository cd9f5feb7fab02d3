"""Emitted Metal and CUDA text for hand-built kernels: key lines, launch packaging, limits."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from conftest import (
    atomic_kernel,
    atomic_spec,
    block_sum_kernel,
    block_sum_spec,
    f32,
    i32,
    make_spec,
)
from kir.backends import emit
from kir.backends.cstyle import BufferInfo, Printer
from kir.backends.metal import METAL

from kir import ir
from kir.errors import KirError, LimitError, UnsupportedError
from kir.ir import Barrier
from kir.ir.types import F32, F64, I32, PointerType
from kir.spec import ArgSpec


def test_metal_block_sum(block_sum):
    kernel, bound = block_sum
    e = emit(kernel, bound, "metal")
    assert e.target == "metal" and e.name.startswith("block_sum_")
    assert "threadgroup float red[256];" in e.source
    assert e.source.count("threadgroup_barrier(mem_flags::mem_threadgroup);") == 2
    assert "simd_shuffle_xor(v, 16)" in e.source
    assert "thread_position_in_threadgroup.x" in e.source
    assert "threadgroup_position_in_grid.x" in e.source
    assert "for (int s = 128; s > 0; s >>= 1) {" in e.source
    # Scalars are 0-d inputs read directly (const constant int&).
    assert "float v = i < n ? x[i] : 0.0f;" in e.source
    assert e.input_names == ("x", "n") and e.input_kinds == ("buffer", "scalar")
    assert e.output_names == ("out",) and e.output_shapes == ((4,),)
    # Grid in threads: 4 blocks x 256 threads.
    assert e.grid == (1024, 1, 1) and e.threadgroup == (256, 1, 1) and e.blocks == (4, 1, 1)
    assert e.init_value == 0.0 and e.inout_decode == () and not e.atomic_outputs


@pytest.mark.parametrize("target, declaration", [
    ("metal", "alignas(16) threadgroup float red[256];"),
    ("cuda", "__shared__ __align__(16) float red[256];")])
def test_shared_arrays_read_as_vectors_are_16_byte_aligned(block_sum, target, declaration):
    """A shared array read as float4 anywhere is declared 16-byte aligned (C++ aligns a
    float array to 4 bytes only); one read element by element keeps the plain form."""
    kernel, bound = block_sum
    vec = ir.types.VectorType(F32, 4)
    first = ir.Store("out", ir.Cast(ir.Special("block", "x"), I32),
                     ir.Component(ir.Load("red", ir.Const(0, I32), vec), 0, F32))
    body = dataclasses.replace(kernel.body, stmts=(*kernel.body.stmts[:-1], first))
    assert declaration in emit(dataclasses.replace(kernel, body=body), bound, target).source
    assert declaration not in emit(kernel, bound, target).source


def test_cuda_block_sum(block_sum):
    kernel, bound = block_sum
    e = emit(kernel, bound, "cuda")
    assert "__shared__ float red[256];" in e.source
    assert e.source.count("__syncthreads();") == 2
    assert "__shfl_xor_sync(0xffffffffu, v, 16, 32)" in e.source
    # MLX passes every input as a pointer: each scalar is read once, at the top, into a
    # local (a pointer nothing marks unaliased would be re-read after every store).
    assert e.source.lstrip().startswith("const int kir_arg_n = n[0];")
    assert "i < kir_arg_n" in e.source and e.source.count("n[0]") == 1
    assert "threadIdx.x" in e.source and "blockIdx.x" in e.source
    assert e.grid == (1024, 1, 1) and e.shared_memory == 0


def test_minimal_parentheses_and_precedence():
    p = Printer(METAL, {"a": BufferInfo(F32)})
    a, b, c = ir.Var("a", I32), ir.Var("b", I32), ir.Var("c", I32)
    assert p.expr(ir.Binary("*", ir.Binary("+", a, b, I32), c, I32)) == "(a + b) * c"
    assert p.expr(ir.Binary("+", a, ir.Binary("*", b, c, I32), I32)) == "a + b * c"
    assert p.expr(ir.Binary("-", a, ir.Binary("-", b, c, I32), I32)) == "a - (b - c)"
    assert p.expr(ir.Binary("-", ir.Binary("-", a, b, I32), c, I32)) == "a - b - c"
    # Clarity parentheses around shifts/bitwise mixed with arithmetic.
    assert p.expr(ir.Binary("<<", ir.Binary("+", a, b, I32), i32(2), I32)) == "(a + b) << 2"
    assert p.expr(ir.Binary("&", a, ir.Binary("==", b, c, I32), I32)) == "a & (b == c)"
    assert p.expr(ir.Unary("-", ir.Unary("-", a, I32), I32)) == "- -a"
    assert p.expr(ir.Cast(i32(3), F32)) == "3.0f"
    assert p.expr(f32(0.1)) == "0.1f"
    assert p.expr(ir.Const(float("-inf"), F32)) == "-INFINITY"


def test_long_expression_prints_without_recursion():
    x = ir.Var("x", F32)
    e: ir.Expr = x
    for _ in range(5000):
        e = ir.Binary("+", e, f32(1), F32)
    text = Printer(METAL, {}).expr(e)
    assert text.startswith("x + 1.0f + ") and text.count("+") == 5000


def test_inout_encoding(inout):
    kernel, bound = inout
    for target in ("metal", "cuda"):
        e = emit(kernel, bound, target)
        # out (init 0) and m (init -inf) tie; 0 wins; m is encoded with -inf's bits.
        assert e.init_value == 0.0
        encs = {x.arg: x for x in e.inout_decode}
        assert encs["m"].key == 0xFF800000 and encs["m"].key_input is None
        assert encs["acc"].key is None and encs["acc"].key_input == "acc_init_bits"
        assert "out" not in encs
        assert "m[i] = kir_xor_f32(" in e.source and "kir_xor_f32(m[i], 0xff800000u)" in e.source
        assert "kir_xor_f32(acc[i], acc_init_bits[i])" in e.source
        assert "kir_xor" in e.header
        assert e.input_names[-1] == "acc_init_bits" and e.input_kinds[-1] == "key"
        assert e.input_dtypes[-1] == "u32"
    metal = emit(kernel, bound, "metal")
    assert "metal::fast::exp(x[i])" in metal.source and "as_type<uint>" in metal.header
    cuda = emit(kernel, bound, "cuda")
    assert "__expf(x[i])" in cuda.source and "__float_as_uint" in cuda.header


def test_metal_atomics(atomic):
    kernel, bound = atomic
    e = emit(kernel, bound, "metal")
    assert e.atomic_outputs
    assert "atomic_fetch_add_explicit(&total[0], x[i], memory_order_relaxed);" in e.source
    c = emit(kernel, bound, "cuda")
    assert "atomicAdd(&total[0], x[i]);" in c.source and not c.atomic_outputs


def test_atomic_max_float_helper_and_encoded_atomic_error():
    spec = atomic_spec(with_max=True)
    # total (0) and m (-inf) both updated atomically: one would need encoding -> error.
    with pytest.raises(UnsupportedError, match="atomic max on 'm'.*cannot fill") as raised:
        emit(atomic_kernel(with_max=True), spec.bind(), "metal")
    assert "args.m" in raised.value.hint  # the spec key to change, not a rule to drop
    args = dict(spec.args)
    args["total"] = ArgSpec("total", "f32", ("1",), role="out", init=float("-inf"))
    spec2 = make_spec(args, spec.sizes, grid=spec.grid, block=spec.block)
    e = emit(atomic_kernel(with_max=True), spec2.bind(), "metal")
    assert e.init_value == float("-inf") and e.inout_decode == ()
    assert "kir_atomic_max(&m[0], " in e.source
    assert "atomic_compare_exchange_weak_explicit" in e.header
    c = emit(atomic_kernel(with_max=True), spec2.bind(), "cuda")
    assert "kir_atomic_max(&m[0], " in c.source and "atomicCAS" in c.header


def test_dynamic_shared(dyn_shared):
    kernel, bound = dyn_shared
    m = emit(kernel, bound, "metal")
    # No dynamic threadgroup memory in MLX Metal: sized from the launch's 1024 bytes.
    assert "threadgroup float buf[256];" in m.source and m.shared_memory == 0
    c = emit(kernel, bound, "cuda")
    assert "extern __shared__ __align__(16) float buf[];" in c.source
    assert c.shared_memory == 1024
    assert c.grid == (768, 1, 1)


def test_limit_threads():
    kernel = block_sum_kernel(threads=1025, shared=256)
    for target in ("metal", "cuda"):
        with pytest.raises(LimitError, match=r"1025 threads .* by 1"):
            emit(kernel, block_sum_spec(1025).bind(), target)


def test_limit_threadgroup_memory():
    kernel = block_sum_kernel(threads=256, shared=10240)   # 40 KiB of f32
    with pytest.raises(LimitError, match=r"40960 bytes exceeds Metal's 32768 by 8192"):
        emit(kernel, block_sum_spec().bind(), "metal")
    emit(kernel, block_sum_spec().bind(), "cuda")   # within CUDA's 48 KiB static


def test_f64_is_refused_on_metal(block_sum):
    kernel, bound = block_sum
    params = (kernel.params[0], ir.Param("out", PointerType(F64)), kernel.params[2])
    k64 = ir.Kernel(kernel.name, params, kernel.body, kernel.launch)
    with pytest.raises(UnsupportedError, match="double"):
        emit(k64, bound, "metal")


def test_names_clashing_with_mlx_are_renamed(block_sum):
    kernel, bound = block_sum
    body = ir.Block((ir.Declare("grid_size", I32, i32(1)), ir.Declare("x_shape", I32, i32(2)),
                     ir.Store("out", ir.Var("grid_size", I32),
                              ir.Cast(ir.Var("x_shape", I32), F32)), *kernel.body.stmts))
    k = ir.Kernel(kernel.name, kernel.params, body, kernel.launch)
    e = emit(k, bound, "metal")
    assert not re.search(r"\bgrid_size\b", e.source) and not re.search(r"\bx_shape\b", e.source)
    assert "int grid_size_v = 1;" in e.source and "out[grid_size_v] = (float)x_shape_v;" in e.source


def test_unknown_target_and_missing_arg(block_sum):
    kernel, bound = block_sum
    with pytest.raises(KirError, match="unknown target"):
        emit(kernel, bound, "vulkan")
    spec = make_spec({k: v for k, v in bound.spec.args.items() if k != "n"}, bound.sizes)
    with pytest.raises(KirError, match="'n' has no entry"):
        emit(kernel, spec.bind(), "metal")


def test_each_body_gets_its_own_kernel_name(block_sum):
    """MLX caches compiled custom kernels by name: a rewritten body under the old name would
    silently run the old code, so the name carries a hash of the text."""
    kernel, bound = block_sum
    first = emit(kernel, bound, "metal")
    assert emit(kernel, bound, "metal").name == first.name
    changed = dataclasses.replace(
        kernel, body=dataclasses.replace(kernel.body, stmts=kernel.body.stmts + (Barrier(),)))
    assert emit(changed, bound, "metal").name != first.name


def test_emitter_and_printer_ask_the_target_not_its_name():
    """Targets are values (kir.target.Target): the emitter and the printer read their fields
    and never compare a target's or a dialect's name (issue 11)."""
    import ast
    from pathlib import Path

    import kir.backends.cstyle
    import kir.backends.emitter

    for module in (kir.backends.emitter, kir.backends.cstyle):
        tree = ast.parse(Path(module.__file__).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                names = [c.value for c in [node.left, *node.comparators]
                         if isinstance(c, ast.Constant)]
                assert not {"metal", "cuda"} & set(names), \
                    f"{module.__name__}:{node.lineno} compares a target name"


def test_cuda_candidates_are_checked_against_cudas_limits():
    """40 KiB of static shared memory is over Metal's limit and within CUDA's: a CUDA search
    must not reject it with Metal's numbers (it did before targets were values)."""
    from kir.backends import TARGETS
    from kir.ir.verify import verify

    kernel = block_sum_kernel(threads=256, shared=10240)
    with pytest.raises(LimitError, match="Metal allows at most 32768"):
        verify(kernel, TARGETS["metal"])
    verify(kernel, TARGETS["cuda"])


def test_a_narrow_shuffle_metal_cannot_express_is_refused_at_its_line(tmp_path):
    """Metal's shuffles span all 32 lanes: an xor shuffle of width 16 whose mask may leave
    its group of 16 lanes (a loop from 16 down) is refused, located at the statement that
    shuffles (expressions carry no location of their own)."""
    from kir.driver.load import load_kernel

    corpus = Path(__file__).parents[1] / "corpus"
    text = corpus.joinpath("attention_decode.cu").read_text()
    assert "int offset = VEC / 2;" in text
    source = tmp_path / "attention_decode.cu"
    source.write_text(text.replace("int offset = VEC / 2;", "int offset = VEC;"))
    spec = tmp_path / "attention_decode.online.kir.toml"
    spec.write_text(corpus.joinpath("attention_decode.online.kir.toml").read_text())
    loaded = load_kernel(source, spec_path=spec)
    with pytest.raises(UnsupportedError) as info:
        emit(loaded.kernel, loaded.bound, "metal")
    assert "width 16" in info.value.message
    assert info.value.loc is not None and info.value.loc.file.endswith("attention_decode.cu")
    assert "__shfl_xor_sync" in source.read_text().splitlines()[info.value.loc.line - 1]


def test_a_narrow_shuffle_inside_its_width_runs_on_metal():
    """The same kernel as written (masks 8, 4, 2, 1 from a loop: each stays inside its 16
    lanes) is a full-width xor shuffle on Metal, and gives the interpreter's results on the
    emulator."""
    from kir.backends.emulate import emulator_available
    from kir.driver.load import load_kernel
    from kir.driver.runners import check_on_target

    corpus = Path(__file__).parents[1] / "corpus"
    loaded = load_kernel(corpus / "attention_decode.cu",
                         spec_path=corpus / "attention_decode.online.kir.toml")
    assert "simd_shuffle_xor" in emit(loaded.kernel, loaded.bound, "metal").source
    if not emulator_available()[0]:
        pytest.skip("no C++ compiler for the emulator")
    outcome = check_on_target(loaded, "emulate-metal")
    assert outcome.result.ok, outcome.result.describe()
