"""llm.c's idioms (``data/llmc_idioms.cu``): ``blockReduce<warpReduceSum>`` (a function as
the template argument of a parameter typed by a function pointer alias), dynamic shared
memory declared ``extern __shared__ char* params[]`` and carved by reinterpret_cast, and
``vec_at`` (a ``float*`` into a local ``float4``, read and written at an index known only as
the kernel runs) — on every target against numpy; a struct-typed carve of dynamic shared
memory; a component index past the vector refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.errors import KirError
from kir.frontends.cuda import load_cuda
from kir.interp import run_kernel
from kir.ir import Launch

KERNEL = Path(__file__).parent / "data" / "llmc_idioms.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_llmc_idioms_on_every_target(target):
    check_everywhere(KERNEL, target, [{}, {"R": 2, "C": 96}], seed=5)


PACKS = """\
struct alignas(16) Pack { float v[4]; };
__global__ void stage(const float* w, float* out, int C) {
    extern __shared__ unsigned char smem[];
    Pack* s_w = reinterpret_cast<Pack*>(smem);
    const Pack* w4 = reinterpret_cast<const Pack*>(w);
    for (int i = threadIdx.x; i < C / 4; i += blockDim.x) s_w[i] = w4[i];
    __syncthreads();
    for (int i = threadIdx.x; i < C / 4; i += blockDim.x)
        for (int k = 0; k < 4; ++k) out[4 * i + k] = s_w[(i + 1) % (C / 4)].v[k];
}
"""


def test_dynamic_shared_bytes_carved_as_a_struct_of_one_member_type():
    # (was an internal error: the pool's element size was asked of the struct)
    kernel = load_cuda(PACKS, "stage.cu", launch=Launch(("1", "1", "1"), (32, 1, 1), 1024))
    w = np.arange(256, dtype=np.float32)
    out = run_kernel(kernel, {"w": w, "out": np.zeros(256, np.float32), "C": 256}, {})["out"]
    assert (out == np.roll(w.reshape(64, 4), -1, axis=0).ravel()).all()


def test_a_struct_of_several_member_types_over_shared_bytes_is_refused():
    source = PACKS.replace("float v[4];", "float v[3]; int tag;")
    with pytest.raises(KirError, match="members are of several types") as info:
        load_cuda(source, "stage.cu", launch=Launch(("1", "1", "1"), (32, 1, 1), 1024))
    assert info.value.loc.line == 4


def test_a_constant_component_past_the_vector_is_refused():
    source = ("__global__ void k(const float4* x, float* out) {\n    float4 v = x[0];\n"
              "    out[0] = reinterpret_cast<float*>(&v)[4];\n}\n")
    with pytest.raises(KirError, match="component 4 of a f32x4") as info:
        load_cuda(source, "k.cu", launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    assert info.value.loc.line == 3
