"""Every example gives the same outputs on every CPU path: kir's interpreter, the emitted
Metal and the emitted CUDA on the C++ emulator, and the user's ORIGINAL CUDA on the emulator
(which shares no code with kir's frontend) — at the spec's default and ragged sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from kir.backends.emulate import emulator_available

from kir.driver.load import load_kernel
from kir.driver.runners import RUNNERS, copy_inputs, run_interp
from kir.spec.compare import compare_outputs

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NAMES = ["flash_attn", "softmax", "layernorm", "sgemm", "reduce", "selective_scan"]
EMULATED = ["emulate-metal", "emulate-cuda", "emulate-original"]

available, why = emulator_available()
pytestmark = pytest.mark.skipif(not available, reason=f"no C++ emulator here: {why}")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("ragged", [False, True], ids=["default", "ragged"])
def test_all_paths_agree_with_the_interpreter(name, ragged):
    path = EXAMPLES / f"{name}.cu"
    spec_sizes = load_kernel(path).spec.ragged if ragged else {}
    assert not ragged or spec_sizes, f"{name} has no ragged sizes in its spec"
    loaded = load_kernel(path, sizes=dict(spec_sizes))
    inputs = loaded.bound.make_inputs(seed=3)
    want = run_interp(loaded, copy_inputs(inputs))
    reference = loaded.bound.reference(copy_inputs(inputs))
    tolerance = lambda out: loaded.bound.tolerance(loaded.bound.spec.args[out].dtype)  # noqa: E731
    assert compare_outputs(want, reference, tolerance).ok
    for target in EMULATED:
        got = RUNNERS[target](loaded, copy_inputs(inputs))
        result = compare_outputs(got, want, tolerance)
        assert result.ok, f"{target} differs from the interpreter:\n{result.describe()}"
