"""pad-shared and transpose-shared on tiles indexed by unsigned variables (a GEMM tutorial's
``uint`` thread indices, ``for (unsigned r ...)``): the rebuilt index is i32, so every
variable of another type is cast into it. Before, the variables were read back as i32 and
the result failed verification ("'innerRowA' is u32 but used as i32"): on the H200 27 of a
GEMM search's 259 candidates were lost that way."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from kir.rewrites.shared_tiles.pad_shared import RULES as PAD
from kir.rewrites.shared_tiles.transpose_shared import RULES as TRANSPOSE_RULES

from kir.interp import run_kernel
from kir.ir import Launch
from kir.ir.verify import verify
from kir.rules import NotApplicable, RuleContext

CORPUS = Path(__file__).resolve().parents[1] / "corpus"

# A 32 x 32 tile transpose through shared memory, indexed with unsigned variables.
UNSIGNED_TRANSPOSE = """
__global__ void tr(const float* a, float* b) {
    __shared__ float tile[32 * 32];
    unsigned int x = threadIdx.x;
    for (unsigned r = 0; r < 32; r++) {
        tile[r * 32 + x] = a[r * 32 + x];
    }
    __syncthreads();
    for (unsigned r = 0; r < 32; r++) {
        b[r * 32 + x] = tile[x * 32 + r];
    }
}
"""
STEPS = [(PAD[0], {"pad": 1}), (PAD[0], {"pad": 4}), (TRANSPOSE_RULES[0], {})]


@pytest.mark.parametrize("rule,params", STEPS, ids=lambda v: getattr(v, "name", str(v)))
def test_unsigned_indices_are_cast_and_kept(rule, params):
    kernel = load_cuda(UNSIGNED_TRANSPOSE, "t.cu", launch=Launch(("1", "1", "1"), (32, 1, 1)))
    result = rule.rewrite(kernel, "tile", params, RuleContext())
    assert not isinstance(result, NotApplicable), result
    verify(result)
    a = np.arange(1024, dtype=np.float32)
    out = run_kernel(result, {"a": a, "b": np.zeros(1024, np.float32)})
    np.testing.assert_array_equal(out["b"], a.reshape(32, 32).T.ravel())


@pytest.mark.parametrize("which", ["blocktiling_1d", "blocktiling_2d"])
@pytest.mark.parametrize("step", ["pad-shared{buffer=As,pad=1}", "pad-shared{buffer=Bs,pad=4}",
                                  "transpose-shared{buffer=As}",
                                  "transpose-shared{buffer=Bs}"])
def test_the_tutorial_gemms_tiles_relayout_and_agree(which, step):
    from kir.backends import TARGETS
    from kir.driver.load import load_kernel
    from kir.driver.registry import load_registry
    from kir.driver.runners import copy_inputs, run_interp
    from kir.rules import apply_trace, context_for, parse_step
    from kir.spec.compare import compare_outputs

    registry = load_registry(plugins=False)
    loaded = load_kernel(CORPUS / "gemm_tutorial.cu",
                         spec_path=CORPUS / f"gemm_tutorial.{which}.kir.toml")
    ctx = context_for(loaded, TARGETS["cuda"])
    kernel = apply_trace(loaded.kernel, [parse_step(step, registry)], registry, ctx,
                         strict=True).kernel
    verify(kernel)
    bound = loaded.bound
    inputs = bound.make_inputs(3)
    want = bound.reference(copy_inputs(inputs))
    got = run_interp(dataclasses.replace(loaded, kernel=kernel), copy_inputs(inputs))
    result = compare_outputs(got, want, lambda o: bound.tolerance(bound.spec.args[o].dtype))
    assert result.ok, result.describe()
