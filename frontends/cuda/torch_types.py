"""PyTorch's accumulation types, as ATen and extension kernels name them in device code.

A kernel templated on ``scalar_t`` accumulates in ``at::acc_type<scalar_t, true>`` (or
``at::opmath_type<scalar_t>``), types ATen's headers define, so the file that uses them
never does; and it names half precision ``at::Half`` / ``c10::Half`` (ctypes_.NAMED_TYPES).
kir reads each as the type ATen defines for CUDA: ``acc_type<T, true>`` is ``float`` for
half, bfloat16 and float, ``double`` for double, ``int64_t`` for integers (with ``false``,
the CPU's: ``double`` for float too); ``opmath_type<T>`` is ``float`` for half and bfloat16
and ``T`` otherwise. A file that defines its own (a struct template of that name) is read
as written instead.
"""

from __future__ import annotations

from kir.ir.types import BOOL, F16, F32, F64, I64, BF16, ScalarType

#: The type functions kir reads, by name
TYPE_FUNCTIONS = ("at::acc_type", "at::opmath_type")


def accumulate_type(name: str, args: list) -> ScalarType | str:
    """The type ``name<args...>`` stands for, or what is wrong with the arguments."""
    usage = {"at::acc_type": "at::acc_type<scalar_t, true>",
             "at::opmath_type": "at::opmath_type<scalar_t>"}[name]
    wanted = 2 if name == "at::acc_type" else 1
    if len(args) != wanted or not isinstance(args[0], ScalarType):
        return f"'{name}' takes a scalar type{' and is_cuda' if wanted == 2 else ''}: {usage}"
    t = args[0]
    if name == "at::opmath_type":
        return F32 if t in (F16, BF16) else t
    on_cuda = bool(getattr(args[1], "value", True))
    if t in (F16, BF16):
        return F32
    if t == F32:
        return F32 if on_cuda else F64
    if t == F64 or t == BOOL:
        return t
    return I64 if t.is_int else t
