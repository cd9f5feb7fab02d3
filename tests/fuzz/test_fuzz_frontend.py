"""Bounded fuzzing of every text kir reads: CUDA, kernel specs (TOML) and IR text.

The promise under test: any input ends in a result or a :class:`KirError` with file:line:col
inside the input, never another exception and never a hang. Budgets are small so the whole
folder runs well under the CI limit; ``benchmarks/fuzz_frontend.py`` is the long run.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from irgen import kernels
from kir.frontends.cuda import MAX_FUNCTION_CHARS, load_cuda

from fuzz.cudagen import (
    EXAMPLES,
    TEMPLATE_VALUES,
    FuzzFailure,
    check_loc,
    examples,
    frontend_outcome,
    generate,
    input_for,
    mutate,
)
from kir.errors import KirError
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.ir.verify import verify

SOURCES = examples()
FUZZ = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.integers(0, 2**32 - 1))
def test_mutated_and_generated_cuda_end_in_kernel_or_located_error(seed):
    frontend_outcome(input_for(seed, SOURCES))


@FUZZ
@given(st.integers(0, 2**32 - 1))
def test_generated_cuda_end_in_kernel_or_located_error(seed):
    frontend_outcome(generate(random.Random(seed)))


def test_examples_still_load():
    """The fuzz seeds themselves are valid kernels (else mutations start from an error)."""
    assert all(frontend_outcome(text, name) == "kernel" for name, text in SOURCES)


def test_oracle_rejects_error_without_location():
    with pytest.raises(FuzzFailure, match="without a location"):
        check_loc(KirError("no place"), "x", "fuzz.cu")


def test_unnamed_kernel_parameter_is_a_located_error():
    """Found by the fuzzer (seed 3597): ``const int,`` crashed the lowering."""
    text = "__global__ void k(const float* x, const int, float* y) { y[0] = x[0]; }\n"
    assert frontend_outcome(text) in ("kernel", "error")


@pytest.mark.parametrize("body", [
    "    y[i] = x[i] * 2.0f + 1.0f;\n" * 32000,                       # ~1 MB of statements
    "    y[0] = " + "(" * 400000 + "1" + ")" * 400000 + ";\n",        # 800 KB of nesting
    "    " + "{" * 500000 + "}" * 500000 + "\n",                       # 1 MB of braces
])
def test_a_one_megabyte_kernel_is_refused_fast_with_its_size(body):
    text = "__global__ void k(const float* x, float* y) {\n    int i = threadIdx.x;\n" + body + "}\n"
    start = time.perf_counter()
    with pytest.raises(KirError, match=f"at most {MAX_FUNCTION_CHARS}") as info:
        load_cuda(text, "big.cu")
    assert time.perf_counter() - start < 5
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == (1, 1)


def test_one_megabyte_of_host_code_around_a_kernel_is_read_in_seconds():
    text = "int host_value;\n" * 60000 + "__global__ void k(float* y) { y[0] = 1.0f; }\n"
    start = time.perf_counter()
    assert load_cuda(text, "big.cu").name == "k"
    assert time.perf_counter() - start < 10


def test_deep_braces_just_under_the_size_limit_finish_in_seconds():
    """The nesting error used to walk every enclosing block's subtree: quadratic, minutes."""
    text = "__global__ void k(float* y) { " + "{" * 60000 + "}" * 60000 + " }\n"
    start = time.perf_counter()
    with pytest.raises(KirError, match="nested more than"):
        load_cuda(text, "deep.cu")
    assert time.perf_counter() - start < 10


def test_macro_bomb_stops_in_seconds():
    text = ("#define A(x) x x x x\n#define B(x) A(A(A(A(x))))\n"
            "__global__ void k(float* y) { B(B(B(y[0]=1;))) }\n")
    start = time.perf_counter()
    with pytest.raises(KirError, match="too many tokens") as info:
        load_cuda(text, "bomb.cu")
    assert info.value.loc is not None and info.value.loc.line == 3
    assert time.perf_counter() - start < 10


def test_file_over_the_preprocessor_limit_is_refused_by_size():
    with pytest.raises(KirError, match="too large") as info:
        load_cuda(" " * (5 * 1024 * 1024), "huge.cu")
    assert info.value.loc is not None


# -- specs -----------------------------------------------------------------------------------

SPECS = [(p, p.read_text()) for p in sorted(EXAMPLES.glob("*.kir.toml"))]
_TOML_TOKENS = ["=", "[", "]", "{", "}", ",", '"', "'", "-1", "0", "1e999", "nan", "-inf",
                "true", "[[args]]", "\n", "#", '"N * 0"', '"2**31"', '"x y"', '"ceil("',
                "shape", "value", "role", "init", "dtype", '"f32"', '"i8"', "range"]


def _mutate_toml(rng: random.Random, text: str) -> str:
    if rng.random() < 0.5:
        return mutate(rng, text)
    lines = text.splitlines()
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(len(lines))
        words = lines[pos].split(" ")
        words[rng.randrange(len(words))] = rng.choice(_TOML_TOKENS)
        lines[pos] = " ".join(words)
    return "\n".join(lines) + "\n"


def _exercise_spec(path: Path) -> None:
    """Load and bind a spec and evaluate everything a run would: each must be a value or a
    KirError naming the spec."""
    from kir.spec import load_spec

    spec = load_spec(path)
    bound = spec.bind({})
    _ = bound.grid, bound.block, bound.shared_bytes
    for name, arg in spec.args.items():
        bound.scalar(name) if arg.is_scalar else bound.shape(name)
    bound.template_values()


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1))
def test_mutated_specs_load_or_give_located_errors(tmp_path_factory, seed):
    rng = random.Random(seed)
    original, text = rng.choice(SPECS)
    path = tmp_path_factory.mktemp("spec") / original.name
    mutated = _mutate_toml(rng, text)
    path.write_text(mutated, encoding="utf-8", errors="replace")
    try:
        _exercise_spec(path)
    except KirError as exc:
        assert exc.loc is not None, f"spec error without a location: {exc}"
        assert exc.loc.file == str(path), str(exc)
    except Exception as exc:  # noqa: BLE001 - what the fuzzer hunts
        raise AssertionError(f"{type(exc).__name__}: {exc}\n--- spec ---\n{mutated}") from exc


# -- IR text ---------------------------------------------------------------------------------

IR_TEXTS = [print_kernel(load_cuda(text, name, template_values=TEMPLATE_VALUES))
            for name, text in SOURCES]


def _check_ir(text: str) -> None:
    try:
        kernel = parse_kernel(text, filename="fuzz.kir")
    except KirError as exc:
        check_loc(exc, text, "fuzz.kir")
        return
    try:
        verify(kernel)
    except KirError:
        pass  # a located statement or the whole kernel: either is a clean rejection
    again = parse_kernel(print_kernel(kernel), filename="again.kir")
    assert again == kernel


@FUZZ
@given(st.integers(0, 2**32 - 1))
def test_mutated_ir_text_parses_or_gives_located_errors(seed):
    rng = random.Random(seed)
    text = mutate(rng, rng.choice(IR_TEXTS))
    try:
        _check_ir(text)
    except FuzzFailure:
        raise
    except AssertionError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise FuzzFailure(f"{type(exc).__name__}: {exc}", text) from exc


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kernels(), st.integers(0, 2**32 - 1))
def test_mutated_random_kernels_ir_text(kernel, seed):
    text = mutate(random.Random(seed), print_kernel(kernel))
    try:
        _check_ir(text)
    except AssertionError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise FuzzFailure(f"{type(exc).__name__}: {exc}", text) from exc


def test_device_function_with_an_unnamed_parameter_is_a_located_error():
    """Found by the long run (seed 83088): overload lookup indexed a missing declarator."""
    text = ("__device__ float f(float) { return 1.0f; }\n"
            "__global__ void k(float* y) { y[0] = f(2.0f); }\n")
    assert frontend_outcome(text) in ("kernel", "error")
