"""What an ``mx.fast.metal_kernel`` / ``mx.fast.cuda_kernel`` call needs, as one frozen value.

**Initial contents of outputs (a real MLX constraint).** MLX kernel outputs are fresh arrays;
the only way to give them a starting value is ``init_value``, ONE float used to fill every
output. CUDA kernels, though, often read an output before writing it (``row_max`` starting at
-inf next to ``out`` starting at 0, or an inout buffer holding caller data). kir keeps such
kernels exact with an XOR encoding:

* ``init_value`` is the constant initial value most outputs share (0 when none do);
* every output whose initial content differs is *stored encoded*: the kernel reads
  ``X[i]`` as ``kir_xor_T(X[i], KEY)`` and writes ``X[i] = kir_xor_T(v, KEY)``, where
  ``kir_xor_T`` XORs the bits of a value of X's type T (16, 32 or 64 bits: ``ENCODABLE``).
  ``KEY`` is ``bits(init) ^ bits(init_value)`` for a constant init, or
  ``X_init_bits[i]`` — an extra uint input computed by the caller from the initial data as
  ``bits(data) ^ bits(init_value)`` — for data inits. The raw buffer starts as
  ``bits(init_value)``, so the decoded value starts as the wanted initial content;
* after the kernel the caller decodes each encoded output with the same key.

Atomic updates cannot go through the encoding. An output the kernel only ever adds to
atomically (``atomicAdd`` with the old value unused) is *accumulated* instead: it starts at 0
and the caller adds its initial contents (data or a constant) after the kernel
(:class:`Accumulation`); the result differs from adding in place only by the order of the
additions, which atomics leave open anyway. Any other atomically updated output must share
``init_value`` (the planner prefers their init); otherwise emission stops with an
UnsupportedError that says which spec ``init`` to change.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from kir.errors import UnsupportedError
from kir.ir.types import ScalarType

_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
# The kir type of an XOR key of each width (a key input's elements, a key constant's suffix).
KEY_TYPES = {2: "u16", 4: "u32", 8: "u64"}
# Output types the encoding covers: every target emitting one has a kir_xor_T for it
# (backends.cuda and backends.metal's _XOR_TYPES; Metal has no f64 at all).
ENCODABLE = frozenset({"f32", "i32", "u32", "f16", "bf16", "i16", "u16", "f64", "i64", "u64"})


@dataclass(frozen=True)
class InoutEncoding:
    """One XOR-encoded output: ``key`` (a constant bit pattern) or ``key_input`` (the name of
    the extra input holding per-element key bits, made from the arg's initial data)."""

    output: str                 # emitted output name
    arg: str                    # the spec argument it stands for
    dtype: str                  # kir scalar dtype name
    key: int | None = None
    key_input: str | None = None


@dataclass(frozen=True)
class Accumulation:
    """An output only ever atomically added to, started at 0 on the GPU; afterwards the
    caller adds ``init``: a constant, or ``"input"`` (the argument's initial data)."""

    output: str                 # emitted output name
    arg: str                    # the spec argument it stands for
    dtype: str                  # kir scalar dtype name
    init: float | str = "input"


@dataclass(frozen=True)
class Emitted:
    """Everything one MLX custom-kernel call needs; see the module docstring for encodings.

    ``input_kinds`` says what each input is: ``"buffer"`` (spec arg data), ``"scalar"`` (a 0-d
    array holding ``scalar_values[arg]``) or ``"key"`` (XOR key bits for an encoded output).
    ``grid`` counts THREADS per axis (blocks × threads), as MLX wants.
    """

    target: str
    name: str
    source: str
    header: str
    input_names: tuple[str, ...]
    input_args: tuple[str, ...]
    input_kinds: tuple[str, ...]
    input_dtypes: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    output_names: tuple[str, ...]
    output_args: tuple[str, ...]
    output_shapes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[str, ...]
    grid: tuple[int, int, int]
    threadgroup: tuple[int, int, int]
    template: tuple[tuple[str, int | bool | str], ...] = ()
    init_value: float | None = None
    atomic_outputs: bool = False
    shared_memory: int = 0
    inout_decode: tuple[InoutEncoding, ...] = ()
    scalar_values: tuple[tuple[str, int | float], ...] = ()
    blocks: tuple[int, int, int] = (1, 1, 1)
    # The kernel's own name (``name`` adds a hash of the text: MLX caches kernels by name).
    kernel_name: str = ""
    accumulate: tuple[Accumulation, ...] = ()
    # The grid in blocks as the kernel's size expressions (``ceil(N / 256)``), for callers
    # that launch at other sizes (the generated module).
    grid_exprs: tuple[str, ...] = ()
    # The kernel's own workspace outputs (kir.ir.Launch.scratch): (argument, element count as
    # a size expression); the caller allocates them and drops them from what it returns.
    scratch: tuple[tuple[str, str], ...] = ()

    def accumulation_for(self, arg: str) -> Accumulation | None:
        return next((a for a in self.accumulate if a.arg == arg), None)

    @property
    def post_processed(self) -> frozenset[str]:
        """Outputs whose raw buffer is not the result yet: decoded or accumulated after the
        kernel."""
        return frozenset({e.arg for e in self.inout_decode} | {a.arg for a in self.accumulate})

    def scalar(self, arg: str) -> int | float:
        """The bound value of scalar argument ``arg``."""
        return dict(self.scalar_values)[arg]

    def encoding_for(self, arg: str) -> InoutEncoding | None:
        return next((e for e in self.inout_decode if e.arg == arg), None)


def bits_dtype(dtype: ScalarType) -> type:
    """The unsigned numpy type with ``dtype``'s width (what keys are made of)."""
    return _BITS[dtype.nbytes]


def value_bits(value: float | np.ndarray, dtype: ScalarType) -> np.ndarray:
    """The bit pattern(s) of ``value`` stored as ``dtype`` (as MLX's fill would store it)."""
    with np.errstate(invalid="ignore", over="ignore"):
        held = np.asarray(value).astype(dtype.numpy)
    if dtype.name == "bf16":  # held as f32: its top half, rounded to nearest even
        wide = held.astype(np.float32).view(np.uint32).astype(np.uint64)
        rounded = (wide + 0x7FFF + ((wide >> 16) & 1)) >> 16
        return np.where(np.isnan(held), (wide >> 16) | 0x40, rounded).astype(np.uint16)
    return held.view(bits_dtype(dtype))


def key_array(encoding: InoutEncoding, data: np.ndarray, init_value: float) -> np.ndarray:
    """The key input for a data-initialized output: ``bits(data) ^ bits(init_value)``."""
    from kir.ir.types import SCALARS

    dtype = SCALARS[encoding.dtype]
    return value_bits(data, dtype) ^ value_bits(init_value, dtype)


def decode(encoding: InoutEncoding, raw: np.ndarray, key: np.ndarray | None) -> np.ndarray:
    """Undo the encoding of one output (``key`` is the key array for data inits). ``raw`` is
    the buffer as the kernel left it, in its own type or as its bits (a bf16 output must come
    as bits: numpy has no bfloat16, and a conversion to f32 may quiet an encoded value that
    looks like a signalling NaN); the result is as kir holds the type (bf16 in f32)."""
    from kir.ir.types import SCALARS

    dtype = SCALARS[encoding.dtype]
    width = bits_dtype(dtype)
    mask = np.asarray(key if key is not None else encoding.key, dtype=width)
    raw = np.ascontiguousarray(raw)
    if dtype.name == "bf16" and raw.dtype != width:
        raise ValueError("decode: a bf16 output's raw buffer must be given as uint16 bits")
    bits = raw.view(width) ^ mask
    if dtype.name == "bf16":  # the top half of an f32
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view(dtype.numpy)


def plan_inits(outputs: list[tuple[str, str, ScalarType, float | str | None]],
               prefer: set[str] = frozenset()) -> tuple[float | None, list[InoutEncoding]]:
    """Choose MLX's one ``init_value`` and the encodings for outputs that differ from it.

    ``outputs`` holds (emitted name, arg, dtype, init) with init a float, ``"input"``,
    ``"none"`` (the kernel writes every element: no fill needed) or None (taken as 0).
    ``init_value`` is None when no output needs a fill (MLX then skips it). Outputs named in
    ``prefer`` (atomically updated ones) decide the choice when
    they have constant inits, because they cannot be encoded.
    """
    outputs = [o for o in outputs if o[3] != "none"]  # written in full by the kernel
    if not outputs:
        return None, []
    inits = {name: (0.0 if init is None else init) for name, _, _, init in outputs}
    constants = [v for n, v in inits.items() if not isinstance(v, str)]
    preferred = [v for n, v in inits.items() if n in prefer and not isinstance(v, str)]
    has_int = any(not dtype.is_float for _, _, dtype, _ in outputs)
    pool = [v for v in (preferred or constants) if np.isfinite(v) or not has_int]
    if not pool:
        init_value = 0.0
    else:
        counts = Counter(pool)
        # Most common; ties go to 0 (the cheapest fill to reason about), then first seen.
        init_value = max(counts, key=lambda v: (counts[v], v == 0.0, -pool.index(v)))
    encodings: list[InoutEncoding] = []
    for name, arg, dtype, _ in outputs:
        init = inits[name]
        if isinstance(init, str):
            _check_encodable(arg, dtype)
            encodings.append(InoutEncoding(name, arg, dtype.name, None, f"{name}_init_bits"))
            continue
        key = int(value_bits(init, dtype) ^ value_bits(init_value, dtype))
        if key:
            _check_encodable(arg, dtype)
            encodings.append(InoutEncoding(name, arg, dtype.name, key, None))
    return float(init_value), encodings


def _check_encodable(arg: str, dtype: ScalarType) -> None:
    if dtype.name not in ENCODABLE:
        raise UnsupportedError(
            f"output {arg!r} ({dtype}) needs an initial value other than MLX's init_value, "
            "which kir can only encode for outputs of 16, 32 or 64-bit types",
            hint=f"in the spec, give args.{arg} the same constant init as the other outputs "
                 "(init = 0 when they start at 0), or init = \"none\" if the kernel writes "
                 "every element")


def accumulated(raw: np.ndarray, initial: np.ndarray | float) -> np.ndarray:
    """An accumulated output after the kernel: the raw result (the sum of what the kernel
    added, from 0) plus the initial contents, in the output's dtype (integers wrap as the
    GPU's do)."""
    raw = np.asarray(raw)
    with np.errstate(over="ignore"):
        return (raw + np.asarray(initial).astype(raw.dtype)).astype(raw.dtype)
