"""Row-kernel hints on kernels written elsewhere (tests/corpus): a vLLM-style RMS norm
(``idx += blockDim.x`` loops, the row scale read from shared memory inside the write loop)
and llm.c's softmax (cooperative groups: ``i += warp.size()``, ``cg::reduce``) get 128-bit
loads in their row loops, and the hinted kernels compute what the originals do."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from kir.backends import TARGETS
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import copy_inputs, run_interp
from kir.rules import apply_trace, context_for
from kir.search.hints import hints

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CASES = [
    ("infer_norm.cu", "infer_norm.rms_norm.kir.toml", {"T": 3, "H": 72},
     {"hoist-invariant{loop=L3}", "vectorize-strided{loop=L0,width=4}",
      "vectorize-strided{loop=L3,width=4}"}, "out"),
    ("llm_train.cu", "llm_train.softmax_forward.kir.toml", {"N": 5, "C": 136},
     {"vectorize-strided{loop=L1,width=4}"}, "out"),
]


@pytest.mark.parametrize("source,spec,sizes,wanted,output", CASES, ids=["rms_norm", "softmax"])
def test_vectorized_rows_fire_and_stay_right(source, spec, sizes, wanted, output):
    loaded = load_kernel(CORPUS / source, spec_path=str(CORPUS / spec), sizes=sizes)
    registry = load_registry()
    ctx = context_for(loaded, TARGETS["cuda"])
    found = {h.name: h for h in hints(loaded.kernel, registry, ctx)}
    assert "vectorized-rows" in found, sorted(found)
    steps = found["vectorized-rows"].steps
    assert wanted <= {str(s) for s in steps}, [str(s) for s in steps]
    hinted = apply_trace(loaded.kernel, list(steps), registry, ctx).kernel
    inputs = loaded.bound.make_inputs(0)
    want = run_interp(loaded, copy_inputs(inputs))[output]
    got = run_interp(dataclasses.replace(loaded, kernel=hinted), copy_inputs(inputs))[output]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # The emitted kernels too, on the CPU emulator in both languages (the hoisted scale, the
    # float4 loads and the counter steps as each back end prints them).
    from kir.backends import emit
    from kir.backends.emulate import emulator_available
    from kir.backends.emulated_runner import EmulatedKernel

    if not emulator_available()[0]:
        pytest.skip("the CPU emulator needs a C++ compiler")
    for target in ("cuda", "metal"):
        ran = EmulatedKernel(emit(hinted, loaded.bound, target))(copy_inputs(inputs))[output]
        np.testing.assert_allclose(ran, want, rtol=1e-4, atol=1e-5, err_msg=target)
