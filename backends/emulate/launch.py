"""Shared plumbing of the emulated kernels: dtypes, launch geometry, running a launch."""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np
from kir.backends.emulate.toolchain import EmulatorError, compile_shared
from kir.backends.emulate.worker import run_request

from kir.errors import Loc

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_STACK_KIB = 256


def to_dtype(value: Any) -> np.dtype:
    """A numpy dtype from a numpy dtype/type, a name ("float32") or an MLX dtype."""
    if isinstance(value, np.dtype):
        return value
    if isinstance(value, type) and issubclass(value, np.generic):
        return np.dtype(value)
    text = str(value).removeprefix("mlx.core.")
    if text == "bfloat16":
        return bfloat16_dtype()
    try:
        return np.dtype(text)
    except TypeError:
        raise EmulatorError(f"unknown dtype {value!r}", kind="launch") from None


def bfloat16_dtype() -> np.dtype:
    """numpy's bfloat16, from the optional ``ml_dtypes`` package (``pip install 'kir[bf16]'``)."""
    try:
        import ml_dtypes
    except ImportError:
        raise EmulatorError("bfloat16 arrays need the optional package ml_dtypes", kind="launch",
                            hint="pip install 'kir[bf16]' (or pip install ml_dtypes)") from None
    return np.dtype(ml_dtypes.bfloat16)


def as_input_array(value: Any) -> np.ndarray:
    """An input as MLX would pass it: Python scalars become 0-d float32/int32/bool arrays."""
    if isinstance(value, bool):
        return np.array(value, dtype=np.bool_)
    if isinstance(value, int):
        return np.array(value, dtype=np.int32)
    if isinstance(value, float):
        return np.array(value, dtype=np.float32)
    return np.asarray(value, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)


def triple(values: Sequence[int], what: str) -> tuple[int, int, int]:
    """(x, y, z) from 1 to 3 positive sizes."""
    items = [int(v) for v in values]
    if not 1 <= len(items) <= 3 or any(v < 1 for v in items):
        raise EmulatorError(f"{what} must be 1 to 3 positive sizes, got {tuple(values)}", kind="launch")
    return tuple(items + [1] * (3 - len(items)))  # type: ignore[return-value]


def check_group_size(threadgroup: tuple[int, int, int]) -> None:
    if threadgroup[0] * threadgroup[1] * threadgroup[2] > 1024:
        raise EmulatorError(f"threadgroup {threadgroup} has more than 1024 threads", kind="launch")


def metal_dims(grid: Sequence[int], threadgroup: Sequence[int]) -> list[int]:
    """Metal dispatchThreads: the grid counts threads; edge groups may be partial. MLX clamps
    the threadgroup to the grid."""
    g = triple(grid, "grid")
    t = tuple(min(a, b) for a, b in zip(triple(threadgroup, "threadgroup"), g))
    check_group_size(t)  # type: ignore[arg-type]
    groups = [-(-a // b) for a, b in zip(g, t)]
    return [*groups, *t, *g]


def cuda_dims(blocks: Sequence[int], block: Sequence[int]) -> list[int]:
    """CUDA: whole blocks only."""
    b = triple(blocks, "grid")
    t = triple(block, "block")
    check_group_size(t)
    return [*b, *t, *(x * y for x, y in zip(b, t))]


def poisoned_outputs(shapes: Sequence[Sequence[int]], dtypes: Sequence[Any],
                     init_value: float | None) -> list[np.ndarray]:
    """Output buffers: ``init_value`` everywhere, else 0xFF bytes (NaN / -1) so that elements
    the kernel never writes are visible."""
    outputs = []
    for shape, dtype in zip(shapes, dtypes):
        array = np.empty(tuple(int(s) for s in shape), dtype=to_dtype(dtype))
        if init_value is not None:
            array.fill(init_value)
        else:
            array.view(np.uint8).fill(0xFF)
        outputs.append(array)
    return outputs


def run_launch(so_path: str, label: str, arrays: list[np.ndarray], args: list[tuple[str, Any]],
               dims: list[int], *, smem: int, returns: list[int], timeout: float,
               sources: dict[str, str], stack_kib: int = DEFAULT_STACK_KIB,
               symbols: list[tuple[str, bytes]] | None = None) -> list[np.ndarray]:
    """Run a compiled kernel in the worker process; the arrays listed in ``returns`` come back.
    ``symbols`` are ``(setter, bytes)``: exported functions the worker calls with the bytes
    before the launch (what ``cudaMemcpyToSymbol`` copies into ``__constant__`` memory)."""
    reply = launch_reply(so_path, label, arrays, args, dims, smem=smem, returns=returns,
                         timeout=timeout, stack_kib=stack_kib, symbols=symbols)
    if reply["rc"] != 0:
        raise runtime_error(reply["err"], sources)
    return reply["arrays"]


def launch_reply(so_path: str, label: str, arrays: list[np.ndarray], args: list[tuple[str, Any]],
                 dims: list[int], *, smem: int, returns: list[int], timeout: float,
                 stack_kib: int = DEFAULT_STACK_KIB,
                 check_roles: list[int] | None = None,
                 symbols: list[tuple[str, bytes]] | None = None) -> dict[str, Any]:
    """The worker's whole reply to one launch (``rc``, ``err``, ``arrays``, and ``check``, the
    checked build's report, when ``check_roles`` gives each array's role). bfloat16 arrays
    travel as uint16, so the worker needs no ml_dtypes."""
    sent = [a.view(np.uint16) if a.dtype.name == "bfloat16" else a for a in arrays]
    request = {"so": so_path, "arrays": sent, "args": args, "dims": dims, "smem": int(smem),
               "stack_kib": int(stack_kib), "return": returns}
    if check_roles is not None:
        request["check"] = {"roles": list(check_roles)}
    if symbols:
        request["symbols"] = list(symbols)
    reply = run_request(request, timeout, f"emulated kernel '{label}'")
    reply["arrays"] = [back.view(arrays[i].dtype) if arrays[i].dtype.name == "bfloat16" else back
                       for i, back in zip(returns, reply["arrays"])]
    return reply


def runtime_error(message: str, sources: dict[str, str]) -> EmulatorError:
    """An EmulatorError for a failed launch, located at the first user line it names."""
    kind = "barrier" if re.search(r"barrier|SIMD|warp|deadlock", message) else "launch"
    for name, text in sources.items():
        match = re.search(re.escape(name) + r":(\d+)(?::(\d+))?", message)
        if match:
            line = int(match.group(1))
            lines = text.splitlines()
            source_line = lines[line - 1] if 1 <= line <= len(lines) else None
            col = int(match.group(2)) if match.group(2) else \
                1 + (len(source_line) - len(source_line.lstrip())) if source_line else 1
            return EmulatorError(message.rstrip(), Loc(name, line, col), kind=kind,
                                 source_line=source_line)
    return EmulatorError(message.rstrip(), kind=kind)


def compile_call(kernel: Any, dialect: str, inputs: Sequence[Any],
                 output_shapes: Sequence[Sequence[int]], output_dtypes: Sequence[Any],
                 template: Any, verbose: bool) -> tuple[list[np.ndarray], Any, dict, Any]:
    """What both dialects' kernel objects do first when called (as MLX does): check the
    argument counts with MLX's messages, generate the translation unit for these inputs and
    compile it. Returns (input arrays, argument slots, body sources, shared-object path)."""
    label = f"[{dialect}_kernel]"
    arrays = [as_input_array(v) for v in inputs]
    if len(arrays) != len(kernel.input_names):
        raise EmulatorError(f"{label} Expected `inputs` to have size "
                            f"{len(kernel.input_names)} but got size {len(arrays)}.",
                            kind="launch")
    if len(output_shapes) != len(kernel.output_names) \
            or len(output_dtypes) != len(kernel.output_names):
        raise EmulatorError(f"{label} Expected {len(kernel.output_names)} output shapes "
                            "and dtypes.", kind="launch")
    template = list(template.items() if isinstance(template, dict) else template)
    unit, slots = kernel.generate(arrays, output_dtypes, template)
    kernel.last_source = unit
    if verbose:
        print(unit)
    sources = {kernel.body_file: kernel.source, kernel.header_file: kernel.header}
    so_path = compile_shared(unit, dialect, tag=kernel.name, sources=sources,
                             extra_flags=tuple(getattr(kernel, "compile_flags", ())))
    return arrays, slots, sources, so_path

