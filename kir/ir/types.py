"""kir's types: scalars, short vectors and buffer pointers.

Types are small frozen values compared structurally. Their text form (``str(t)``) is what the
IR printer writes and the IR parser reads: ``f32``, ``f32x4``, ``f32* global const``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class ScalarType:
    """A scalar dtype: bool, i8, u8, i16, u16, i32, u32, i64, u64, f16, bf16, f32, f64
    (``i8``/``u8`` are C's char types and ``i16``/``u16`` its short types: buffers and
    locals of bytes and halfwords; arithmetic promotes them to i32)."""

    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.name in ("f16", "bf16", "f32", "f64")

    @property
    def is_int(self) -> bool:
        return self.name in ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")

    @property
    def is_signed(self) -> bool:
        return self.name in ("i8", "i16", "i32", "i64") or self.is_float

    @property
    def bits(self) -> int:
        return {"bool": 8, "i8": 8, "u8": 8, "i16": 16, "u16": 16, "i32": 32, "u32": 32,
                "i64": 64, "u64": 64,
                "f16": 16, "bf16": 16, "f32": 32, "f64": 64}[self.name]

    @property
    def nbytes(self) -> int:
        return self.bits // 8

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype used to hold values of this type (bf16 is held as f32)."""
        return np.dtype({"bool": np.bool_, "i8": np.int8, "u8": np.uint8,
                         "i16": np.int16, "u16": np.uint16,
                         "i32": np.int32, "u32": np.uint32,
                         "i64": np.int64, "u64": np.uint64, "f16": np.float16,
                         "bf16": np.float32, "f32": np.float32, "f64": np.float64}[self.name])


@dataclass(frozen=True, slots=True)
class VectorType:
    """A short vector of 2, 3 or 4 scalars, as CUDA's float4 / Metal's float4."""

    elem: ScalarType
    count: int

    def __str__(self) -> str:
        return f"{self.elem}x{self.count}"

    @property
    def nbytes(self) -> int:
        return self.elem.nbytes * self.count


@dataclass(frozen=True, slots=True)
class MatrixType:
    """A ``rows`` x ``cols`` matrix fragment held cooperatively by the 32 lanes of one warp
    (Metal ``simdgroup_float8x8``, CUDA a WMMA-like fragment). Only matrix statements
    (:class:`kir.ir.MatrixFill` ...) name values of this type; text form ``f32m8x8``."""

    elem: ScalarType
    rows: int
    cols: int

    def __str__(self) -> str:
        return f"{self.elem}m{self.rows}x{self.cols}"

    @property
    def count(self) -> int:
        return self.rows * self.cols


ADDRESS_SPACES = ("global", "shared", "local")


@dataclass(frozen=True, slots=True)
class PointerType:
    """A pointer to elements of ``elem`` in an address space; only kernel buffer parameters
    have pointer type in kir IR (pointer variables are lowered to integer offsets)."""

    elem: ScalarType | VectorType
    space: str = "global"
    const: bool = False
    restrict: bool = False

    def __str__(self) -> str:
        text = f"{self.elem}* {self.space}"
        if self.const:
            text += " const"
        if self.restrict:
            text += " restrict"
        return text


Type = ScalarType | VectorType | PointerType | MatrixType

BOOL = ScalarType("bool")
I32 = ScalarType("i32")
U32 = ScalarType("u32")
I64 = ScalarType("i64")
U64 = ScalarType("u64")
F16 = ScalarType("f16")
BF16 = ScalarType("bf16")
F32 = ScalarType("f32")
F64 = ScalarType("f64")

I8 = ScalarType("i8")
U8 = ScalarType("u8")
I16 = ScalarType("i16")
U16 = ScalarType("u16")

SCALARS = {t.name: t for t in (BOOL, I8, U8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64)}


def parse_type(text: str) -> ScalarType | VectorType:
    """Parse a scalar or vector type name such as ``f32`` or ``f32x4`` (or a matrix
    fragment type such as ``f32m8x8``)."""
    if text in SCALARS:
        return SCALARS[text]
    if "m" in text:
        elem, _, shape = text.partition("m")
        rows, _, cols = shape.partition("x")
        if elem in SCALARS and rows.isdigit() and cols.isdigit() and int(rows) and int(cols):
            return MatrixType(SCALARS[elem], int(rows), int(cols))  # type: ignore[return-value]
    if "x" in text:
        elem, _, count = text.rpartition("x")
        if elem in SCALARS and count in ("2", "3", "4"):
            return VectorType(SCALARS[elem], int(count))
    raise ValueError(f"unknown type {text!r}")


def rank(t: ScalarType) -> int:
    """C's integer conversion rank extended to floats (higher wins in arithmetic)."""
    return ["bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "bf16", "f32",
            "f64"].index(t.name)


def common_type(a: ScalarType, b: ScalarType) -> ScalarType:
    """C's usual arithmetic conversions (bool/char/short promote to int first)."""
    if a in (BOOL, I8, U8, I16, U16):
        a = I32
    if b in (BOOL, I8, U8, I16, U16):
        b = I32
    if a.is_float or b.is_float:
        floats = [t for t in (a, b) if t.is_float]
        best = max(floats, key=rank)
        # half op half stays half in CUDA's operator overloads; mixing with float is float.
        return best
    if a == b:
        return a
    # Both integers of differing type: the higher rank wins; signed vs unsigned of the same
    # width goes unsigned; i64 vs u32 stays i64 (it can represent every u32).
    if {a.name, b.name} == {"i64", "u32"}:
        return I64
    return max(a, b, key=rank)
