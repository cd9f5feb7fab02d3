"""Outputs that start with data (issue 13): float4 access and atomic accumulation on them,
bf16, 16- and 64-bit outputs updated in place (a paged KV cache, llm.c's AdamW), checked
against numpy on the interpreter and as emitted Metal and CUDA on the CPU emulator, and the
hints that say which spec ``init`` to change when it cannot work."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.backends import emit
from kir.backends.emitted import InoutEncoding, decode, key_array, value_bits
from kir.backends.emulate import emulator_available

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target
from kir.errors import UnsupportedError
from kir.ir.types import BF16

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
        assert "kir_xor_f32(C[(i * 4) + 3], C_init_bits[(i * 4) + 3])" in e.source
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


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["paged_append_bf16", "adamw_bf16"])
def test_bf16_outputs_updated_in_place(name, target):
    """A paged bf16 KV cache written a row per sequence (the rest keeps the caller's data)
    and an AdamW step on bf16 parameters beside f32 moments: both were refused for MLX
    ("can only encode for f32, i32, u32 and f16 outputs")."""
    loaded = load_kernel(DATA / f"{name}.cu")
    outcome = check_on_target(loaded, target)
    assert outcome.result.ok, outcome.result.describe()


@pytest.mark.parametrize("target", TARGETS[:1] + TARGETS[2:])
def test_sixty_four_and_sixteen_bit_outputs_updated_in_place(target):
    """i64 counts, u16 counters and f64 sums kept in place (CUDA: Metal has no double)."""
    loaded = load_kernel(DATA / "wide_counters.cu")
    outcome = check_on_target(loaded, target)
    assert outcome.result.ok, outcome.result.describe()
    if target == "interp":
        e = emit(loaded.kernel, loaded.bound, "cuda")
        assert [(enc.arg, enc.dtype) for enc in e.inout_decode] == \
            [("counts", "i64"), ("seen", "u16"), ("sums", "f64")]
        assert "kir_xor_i64(" in e.source and "kir_xor_f64(" in e.source
        assert [d for d, k in zip(e.input_dtypes, e.input_kinds) if k == "key"] == \
            ["u64", "u16", "u64"]


def test_bf16_decode_restores_every_bit_pattern_even_where_the_encoding_looks_like_nan():
    """Encoded bf16 bits can be any pattern (a signalling NaN too), so the runners hand the
    raw buffer over as bits; decode restores the data exactly, for all 65536 values."""
    enc = InoutEncoding("o", "o", "bf16", key_input="o_init_bits")
    every = np.arange(1 << 16, dtype=np.uint32)
    data = (every << 16).view(np.float32)           # every bf16 value, held in f32
    key = key_array(enc, data, 0.0)
    finite = ~np.isnan(data)
    assert (key[finite] == every[finite]).all()      # bits(data) ^ bits(0.0)
    untouched = np.zeros(1 << 16, np.uint16)         # MLX's fill of 0.0, never written
    back = decode(enc, untouched, key)
    assert (back.view(np.uint32)[finite] == (every << 16)[finite]).all()
    # whatever the kernel left (every pattern, 0x7F81's signalling NaN among them), the
    # decoded value's bits are exactly the raw bits XOR the key
    raw = every.astype(np.uint16)
    key = key_array(enc, np.roll(data, 1), 0.0)
    got = decode(enc, raw, key).view(np.uint32)
    assert (got == (raw ^ key).astype(np.uint32) << 16).all()
    written = (value_bits(data[finite], BF16) ^ key[finite]).astype(np.uint16)
    assert (decode(enc, written, key[finite]) == data[finite]).all()
    with pytest.raises(ValueError, match="uint16 bits"):
        decode(enc, data, key)


def test_an_eight_bit_output_holding_data_is_refused_with_the_spec_key_to_change(tmp_path):
    (tmp_path / "k.cu").write_text(
        "__global__ void bump(unsigned char* flags, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) flags[i] = flags[i] + 1;\n}\n")
    (tmp_path / "k.kir.toml").write_text(
        'sizes = { N = 100 }\nlaunch = { grid = ["ceil(N / 64)"], block = [64] }\n[args]\n'
        'flags = { dtype = "u8", shape = ["N"], role = "inout", init = "input" }\n'
        'n = { value = "N", dtype = "i32" }\n')
    loaded = load_kernel(tmp_path / "k.cu")
    with pytest.raises(UnsupportedError, match="16, 32 or 64-bit") as raised:
        emit(loaded.kernel, loaded.bound, "cuda")
    assert "args.flags" in raised.value.hint


def test_mlx_runner_hands_an_encoded_bf16_output_to_the_decoder_as_bits():
    """MLX (its CPU back end here) gives back the buffer a kernel left untouched, MLX's fill;
    decoded, it is the caller's data, bit for bit."""
    mx = pytest.importorskip("mlx.core")
    from kir.backends.mlx_runner import MLXKernel, mx_dtype, prepare_inputs

    loaded = load_kernel(DATA / "adamw_bf16.cu")
    e = emit(loaded.kernel, loaded.bound, "cuda")
    runner = MLXKernel.__new__(MLXKernel)  # no GPU here: only its host-side decoding runs
    runner.emitted = e
    inputs = loaded.bound.make_inputs(0)
    _, keys = prepare_inputs(e, inputs)
    untouched = [mx.full(shape, e.init_value, dtype=mx_dtype(d))
                 for shape, d in zip(e.output_shapes, e.output_dtypes)]
    got = runner.finish(untouched, keys)
    for arg in ("params", "m", "v"):
        np.testing.assert_array_equal(got[arg], inputs[arg])
