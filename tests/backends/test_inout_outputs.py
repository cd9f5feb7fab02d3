"""Outputs that start with data (issue 13): float4 access and atomic accumulation on them,
checked against numpy on the interpreter and as emitted Metal and CUDA on the CPU emulator,
and the hints that say which spec ``init`` to change when it cannot work."""

from __future__ import annotations

from pathlib import Path

import pytest
from kir.backends import emit
from kir.backends.emulate import emulator_available

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target
from kir.errors import UnsupportedError

DATA = Path(__file__).parent / "data"
AVAILABLE, REASON = emulator_available()
TARGETS = ["interp"] + (["emulate-metal", "emulate-cuda"] if AVAILABLE else [])


@pytest.mark.parametrize("target", TARGETS)
def test_float4_reads_and_writes_of_an_output_holding_data(target):
    """C = alpha A + beta C through float4 loads and stores of C (a GEMM's beta * C)."""
    loaded = load_kernel(DATA / "axpby4.cu")
    outcome = check_on_target(loaded, target)
    assert outcome.result.ok, outcome.result.describe()


def test_float4_on_an_encoded_output_goes_element_by_element():
    loaded = load_kernel(DATA / "axpby4.cu")
    for target in ("metal", "cuda"):
        e = emit(loaded.kernel, loaded.bound, target)
        assert e.encoding_for("C") is not None and e.accumulate == ()
        # each lane decoded with its own key, and the vector written lane by lane
        assert "kir_xor(C[(i * 4) + 3], C_init_bits[(i * 4) + 3])" in e.source
        assert "kir_vector.w" in e.source


@pytest.mark.parametrize("target", TARGETS)
def test_atomic_adds_into_an_output_holding_data(target):
    """Gradient accumulation: atomicAdd into existing gradients, rows picked by an index
    buffer whose range is a size expression ([0, "V - 1"])."""
    loaded = load_kernel(DATA / "grad_acc.cu")
    inputs = loaded.bound.make_inputs(0)
    assert inputs["idx"].min() >= 0 and inputs["idx"].max() <= loaded.bound.sizes["V"] - 1
    outcome = check_on_target(loaded, target)
    assert outcome.result.ok, outcome.result.describe()


def test_an_output_only_atomically_added_to_starts_at_zero():
    loaded = load_kernel(DATA / "grad_acc.cu")
    for target in ("metal", "cuda"):
        e = emit(loaded.kernel, loaded.bound, target)
        assert e.init_value == 0.0 and e.inout_decode == ()
        assert [(a.arg, a.init) for a in e.accumulate] == [("dW", "input")]
        assert e.post_processed == {"dW"}


def test_an_atomic_whose_old_value_is_used_cannot_accumulate(tmp_path):
    """The kernel reads the old value: it must see the data, so no start at 0; the error
    says which spec key to change."""
    source = (DATA / "grad_acc.cu").read_text().replace(
        "atomicAdd(&dW[idx[i] * d + j], dy[i * d + j]);",
        "float old = atomicAdd(&dW[idx[i] * d + j], dy[i * d + j]); (void)old;")
    (tmp_path / "g.cu").write_text(source)
    (tmp_path / "g.kir.toml").write_text((DATA / "grad_acc.kir.toml").read_text()
                                         .replace('reference = "refs:grad_acc"\n', ""))
    loaded = load_kernel(tmp_path / "g.cu")
    with pytest.raises(UnsupportedError, match="atomic add on 'dW'") as raised:
        emit(loaded.kernel, loaded.bound, "metal")
    assert "args.dW" in raised.value.hint and "init" in raised.value.hint
