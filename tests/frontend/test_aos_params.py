"""Arrays of structs as kernel parameters (``const Body* bodies``): a struct whose members are
all of one scalar type is a buffer of that type seen through the struct, on every target
(the original kernel on the emulator included, whose ``float3`` is CUDA's 12 bytes); other
structs are refused where the parameter is declared, saying what to do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.driver.load import load_kernel
from kir.driver.spec_draft import draft_spec
from kir.errors import KirError
from kir.interp import run_kernel
from kir.ir import Launch

KERNEL = Path(__file__).parent / "data" / "aos_bodies.cu"
ONE = Launch(("1", "1", "1"), (1, 1, 1), 0)


@pytest.mark.parametrize("target", TARGETS)
def test_array_of_structs_everywhere(target):
    check_everywhere(KERNEL, target, [{}, {"n": 33}], seed=2)


def test_the_parameter_is_a_buffer_of_the_members_type():
    params = {p.name: str(p.type) for p in load_kernel(KERNEL).kernel.params}
    assert params["bodies"].startswith("f32*") and params["next"].startswith("f32*")


@pytest.mark.parametrize("members, message", [
    ("float x; int kind;", "not all of one scalar type"),
    ("float x, y, z; double w;", "not all of one scalar type"),
])
def test_other_structs_are_refused_where_declared(members, message):
    source = (f"struct P {{ {members} }};\n"
              "__global__ void k(const P* parts, float* out) {\n"
              "    out[0] = parts[0].x;\n}\n")
    with pytest.raises(KirError, match=message) as info:
        load_cuda(source, "p.cu", launch=ONE)
    assert (info.value.loc.line, info.value.loc.col) == (2, 19)


def test_a_struct_with_padding_is_refused():
    source = ("struct __align__(16) P { float x, y, z; };\n"
              "__global__ void k(const P* parts, float* out) {\n"
              "    out[0] = parts[1].x;\n}\n")
    with pytest.raises(KirError, match="16 bytes with padding after its 3 f32 members"):
        load_cuda(source, "p.cu", launch=ONE)


def test_sizeof_a_struct_with_a_float3_is_cuda_s():
    """float3 is three floats aligned to 4 in CUDA (not padded to 16 as in Metal)."""
    source = ("struct B { float3 p; float m; float v[3]; float a; };\n"
              "__global__ void k(int* out) { out[0] = sizeof(B); out[1] = sizeof(float3); }\n")
    kernel = load_cuda(source, "s.cu", launch=ONE)
    out = run_kernel(kernel, {"out": np.zeros(2, np.int32)})["out"]
    assert out.tolist() == [32, 12]


def test_spec_init_drafts_the_members_type(tmp_path):
    source = tmp_path / "bodies.cu"
    source.write_text(KERNEL.read_text() + """
int main() {
    int n = 1000; Body *a, *b; float* e;
    cudaMalloc(&a, n * sizeof(Body)); cudaMalloc(&b, n * sizeof(Body));
    cudaMalloc(&e, n * sizeof(float));
    advance_bodies<<<(n + 127) / 128, 128>>>(a, b, e, n, 0.01f);
}
""")
    draft = draft_spec(source)
    assert 'bodies = { dtype = "f32"' in draft.text
    assert any("an array of Body" in todo for todo in draft.todos)
