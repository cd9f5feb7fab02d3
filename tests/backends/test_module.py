"""The generated MLX module's own logic, with mx.fast.metal_kernel replaced by a fake that
behaves like the emitted inout kernel on raw (encoded) buffers — no Metal device needed."""

from __future__ import annotations

import importlib.util

import mlx.core as mx
import numpy as np
import pytest
from kir.backends import emit
from kir.backends.emitted import Emitted, decode, key_array, value_bits
from kir.ir.types import BF16
from kir.backends.module import full_metal_source, write_metal_source, write_module


class FakeKernel:
    """Runs the inout kernel's semantics the way the emitted body does: outputs start as
    MLX's init_value fill, encoded outputs are read and written through the XOR key."""

    def __init__(self, **build):
        self.build = build
        self.calls = []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        x, n, key = (np.array(a) for a in kwargs["inputs"])
        fill = np.float32(kwargs["init_value"])
        out = np.full(kwargs["output_shapes"][0], fill, np.float32)
        m_raw = np.full(kwargs["output_shapes"][1], fill, np.float32).view(np.uint32)
        acc_raw = np.full(kwargs["output_shapes"][2], fill, np.float32).view(np.uint32)
        m_key = np.uint32(0xFF800000)
        out[:n] = 2 * x[:n]
        m = (m_raw ^ m_key).view(np.float32)
        m_raw = (np.maximum(m, x).astype(np.float32).view(np.uint32) ^ m_key)
        acc = (acc_raw ^ key).view(np.float32)
        acc_raw = (acc + np.exp(x)).astype(np.float32).view(np.uint32) ^ key
        return [mx.array(out), mx.array(m_raw.view(np.float32)),
                mx.array(acc_raw.view(np.float32))]


@pytest.fixture
def generated(tmp_path, monkeypatch, inout):
    kernel, bound = inout
    emitted = emit(kernel, bound, "metal")
    made = []

    def fake_metal_kernel(**build):
        made.append(FakeKernel(**build))
        return made[-1]

    monkeypatch.setattr(mx.fast, "metal_kernel", fake_metal_kernel)
    monkeypatch.setattr(mx.metal, "is_available", lambda: True)
    path = write_module(emitted, tmp_path / "inout_mod.py", bound.spec)
    spec = importlib.util.spec_from_file_location("inout_mod", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, made, emitted


def test_module_runs_and_decodes(generated):
    module, made, emitted = generated
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 200).astype(np.float32)
    acc0 = rng.uniform(-1, 1, 200).astype(np.float32)
    out, m, acc = module.inout_k(mx.array(x), mx.array(acc0))
    np.testing.assert_allclose(np.array(out), 2 * x)
    np.testing.assert_array_equal(np.array(m), x)                 # max(-inf, x)
    np.testing.assert_allclose(np.array(acc), acc0 + np.exp(x), rtol=1e-6)
    module.inout_k(mx.array(x), mx.array(acc0))
    assert len(made) == 1 and len(made[0].calls) == 2           # built once
    build, call = made[0].build, made[0].calls[0]
    assert build["name"] == emitted.name and build["name"].startswith("inout_k_")
    assert build["source"] == emitted.source
    assert build["input_names"] == ["x", "n", "acc_init_bits"]
    assert build["output_names"] == ["out", "m", "acc"] and build["atomic_outputs"] is False
    assert call["grid"] == (256, 1, 1) and call["threadgroup"] == (64, 1, 1)
    assert call["init_value"] == 0.0 and "template" not in call
    assert int(np.array(call["inputs"][1])) == 200


def test_module_checks_shapes_and_dtypes(generated):
    module, _, _ = generated
    with pytest.raises(ValueError, match=r"argument 'x' must have 1 dimensions"):
        module.inout_k(mx.zeros((2, 100)), mx.zeros((200,)))
    with pytest.raises(ValueError, match=r"acc.shape\[0\] = 199 but x.shape\[0\] = 200"):
        module.inout_k(mx.zeros((200,)), mx.zeros((199,)))
    # no kernel for int32 and no reference_mlx to fall back on: the error says both
    with pytest.raises(RuntimeError, match="no kernel takes .*int32.*no reference_mlx"):
        module.inout_k(mx.zeros((200,)), mx.zeros((200,), dtype=mx.int32))


def test_template_args_passed(tmp_path, monkeypatch, inout):
    kernel, bound = inout
    e = emit(kernel, bound, "metal")
    e = Emitted(**{**e.__dict__, "template": (("BM", 32), ("T", "f32"))})
    made = []
    monkeypatch.setattr(mx.fast, "metal_kernel", lambda **b: made.append(FakeKernel(**b))
                        or made[-1])
    monkeypatch.setattr(mx.metal, "is_available", lambda: True)
    path = write_module(e, tmp_path / "tmod.py", bound.spec)
    spec = importlib.util.spec_from_file_location("tmod", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.inout_k(mx.zeros((200,)), mx.zeros((200,)))
    assert made[0].calls[0]["template"] == [("BM", 32), ("T", mx.float32)]


def test_decode_path_with_mlx_cpu(inout):
    """The XOR decode on real MLX arrays (CPU) matches kir's numpy decode."""
    kernel, bound = inout
    e = emit(kernel, bound, "metal")
    enc = e.encoding_for("acc")
    data = np.linspace(-3, 3, 200, dtype=np.float32)
    key = key_array(enc, data, e.init_value)
    raw = mx.full((200,), e.init_value, dtype=mx.float32)       # what MLX's fill gives
    decoded = (raw.view(mx.uint32) ^ mx.array(key)).view(mx.float32)
    np.testing.assert_array_equal(np.array(decoded), data)
    np.testing.assert_array_equal(decode(enc, np.array(raw), key), data)
    m_enc = e.encoding_for("m")
    assert np.isneginf(decode(m_enc, np.zeros(3, np.float32), None)).all()
    assert int(value_bits(float("-inf"), kernel.params[0].type.elem)) == 0xFF800000


def test_bf16_bits_are_those_mlx_stores_rounded_to_nearest_even():
    # bf16 is held as f32 in numpy: its bits are the f32's top half, rounded (a module's
    # bf16 variant of a typename-T kernel asks for them; a plain view raised ValueError)
    import mlx.core as mx

    values = [0.0, 1.0, -2.5, float("inf"), 1.00390625, 1.01171875, 3.14159]
    got = [int(value_bits(v, BF16)) for v in values]
    want = [int(mx.array(v, dtype=mx.bfloat16).view(mx.uint16).item()) for v in values]
    assert got == want


def test_full_metal_source(tmp_path, inout):
    kernel, bound = inout
    e = emit(kernel, bound, "metal")
    text = full_metal_source(e)
    assert "[[kernel]] void custom_kernel_inout_k(" in text
    assert "const device float* x [[buffer(0)]]," in text
    assert "const constant int32_t& n [[buffer(1)]]," in text
    assert "device float* acc [[buffer(5)]]," in text
    assert "uint3 threadgroup_position_in_grid [[threadgroup_position_in_grid]]) {" in text
    assert "thread_index_in_simdgroup [[" not in text
    assert write_metal_source(e, tmp_path / "k.metal").read_text() == text
