"""Build, run and time emitted kernels through MLX (``mx.fast.metal_kernel`` / ``cuda_kernel``).

One :class:`MLXKernel` per emitted source: the MLX kernel object is built once (and cached by
a hash of everything that shapes it) and called with numpy inputs keyed by spec argument name,
as :meth:`kir.spec.BoundSpec.make_inputs` makes them. Outputs come back decoded (see
:mod:`kir.backends.emitted` for why some outputs are XOR-encoded).
"""

from __future__ import annotations

import hashlib
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from kir.backends.allocation import allocated_elements, output_allocations, unpad_outputs
from kir.backends.emitted import Emitted, accumulated, decode, key_array

from kir.errors import KirError

MX_DTYPES = {"bool": "bool_", "i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32",
             "u32": "uint32",
             "i64": "int64", "u64": "uint64",
             "f16": "float16", "bf16": "bfloat16", "f32": "float32", "u16": "uint16",
             "f64": "float64"}
_KERNELS: dict[str, Any] = {}


def _mx():
    try:
        import mlx.core as mx
    except ImportError:
        raise KirError("MLX is not installed", hint="pip install mlx") from None
    return mx


def available_targets() -> list[str]:
    """The MLX GPU targets usable here: "metal" on Apple Silicon, "cuda" on NVIDIA."""
    try:
        mx = _mx()
    except KirError:
        return []
    found = []
    try:
        if mx.metal.is_available():
            found.append("metal")
    except Exception:  # noqa: BLE001 - a CPU-only build may not have the query at all
        pass
    cuda = getattr(mx, "cuda", None)
    try:
        if cuda is not None and cuda.is_available():
            found.append("cuda")
    except Exception:  # noqa: BLE001
        pass
    return found


def require_target(target: str, otherwise: str = "use --target interp, or an emulate-* "
                                                  "target, instead") -> None:
    """Raise a KirError naming what is missing when ``target`` cannot run here; the hint
    ends with ``otherwise``, what the calling command offers instead."""
    have = available_targets()
    if target not in have:
        where = {"metal": "an Apple Silicon Mac with MLX's Metal back end",
                 "cuda": "an NVIDIA GPU with MLX's CUDA back end (pip install 'mlx[cuda]')"}
        raise KirError(f"target {target!r} is not available on this machine "
                       f"(available: {', '.join(have) or 'none'})",
                       hint=f"running on {target} needs {where.get(target, target)}; "
                            f"{otherwise}")


def mx_dtype(name: str):
    """The MLX dtype for a kir dtype name."""
    return getattr(_mx(), MX_DTYPES[name])


def source_hash(emitted: Emitted) -> str:
    """A key over everything that makes MLX build a different kernel object."""
    text = "\0".join([emitted.target, emitted.name, emitted.source, emitted.header,
                      repr(emitted.input_names), repr(emitted.output_names),
                      repr(emitted.atomic_outputs), repr(emitted.shared_memory)])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def build_kernel(emitted: Emitted):
    """The ``mx.fast.*_kernel`` object for ``emitted`` (built once per source hash)."""
    key = source_hash(emitted)
    if key in _KERNELS:
        return _KERNELS[key]
    mx = _mx()
    common = dict(name=emitted.name, input_names=list(emitted.input_names),
                  output_names=list(emitted.output_names), source=emitted.source,
                  header=emitted.header)
    if emitted.target == "metal":
        kernel = mx.fast.metal_kernel(**common, atomic_outputs=emitted.atomic_outputs)
    else:
        kernel = mx.fast.cuda_kernel(**common, shared_memory=emitted.shared_memory)
    _KERNELS[key] = kernel
    return kernel


@dataclass(frozen=True)
class Timing:
    """Wall-clock times of repeated runs, in milliseconds; ``spread`` = (max-min)/median.
    ``runs`` counts the timed runs; ``cut_short`` says timing stopped after the first because
    that run already took longer than the caller's ``give_up_ms``."""

    median_ms: float
    min_ms: float
    max_ms: float
    spread: float
    runs: int = 0
    cut_short: bool = False


# A slow kernel's runs vary little against their length: past this many milliseconds of
# timed runs, fewer runs (at least SLOW_RUNS) say as much (an unrewritten attention kernel
# takes 3 s a run at N=4096, and 13 runs of it were a third of a two-minute search).
TIMING_BUDGET_MS = 2000.0
SLOW_RUNS = 3


def measure(run_once: Callable[[], None], warmup: int = 3, repeat: int = 10,
            give_up_ms: float | None = None) -> Timing:
    """Time ``run_once`` (which must block until its work is done): ``warmup`` untimed runs,
    then ``repeat`` timed ones. The first warm-up run is timed: with ``give_up_ms``, when it
    alone takes longer, timing stops there: a search does not need ten runs of a candidate
    several times slower than its best to know it lost (the one run is reported, flagged
    ``cut_short``); and when the remaining runs would take more than ``TIMING_BUDGET_MS``,
    the other warm-ups are skipped and the timed runs cut to what fits (``SLOW_RUNS`` at
    least; ``runs`` says how many)."""
    warmup = max(warmup, 0)
    if warmup:
        start = time.perf_counter()
        run_once()
        first = (time.perf_counter() - start) * 1e3
        if give_up_ms is not None and first > give_up_ms:
            return Timing(first, first, first, 0.0, 1, True)
        warmup -= 1
        if first * (warmup + repeat) > TIMING_BUDGET_MS:
            warmup = 0
            repeat = min(repeat, max(SLOW_RUNS, int(TIMING_BUDGET_MS // max(first, 1e-9))))
    for _ in range(warmup):
        run_once()
    times = []
    for _ in range(max(repeat, 1)):
        start = time.perf_counter()
        run_once()
        times.append((time.perf_counter() - start) * 1e3)
    median = statistics.median(times)
    return Timing(median, min(times), max(times),
                  (max(times) - min(times)) / median if median > 0 else 0.0, len(times))


class MLXKernel:
    """An emitted kernel ready to call through MLX with numpy inputs."""

    # Whether the kernel was compiled before its first call (kir.backends.mlx_precompiled);
    # MLX's own kernels compile on their first call.
    compiled_ahead = False

    def __init__(self, emitted: Emitted, *, check_target: bool = True) -> None:
        if check_target:
            require_target(emitted.target)
        self.emitted = emitted
        self.kernel = build_kernel(emitted)

    def prepare(self, inputs: dict[str, Any]) -> tuple[list, dict[str, np.ndarray]]:
        """MLX input arrays in signature order, and the key arrays of data-initialized
        outputs (needed again to decode)."""
        e = self.emitted
        arrays, keys = prepare_inputs(e, inputs)
        # A scalar is passed as a one-element array: padded like a small output so that MLX
        # does not take it from its managed small pool (kir.backends.allocation).
        arrays = [_padded_scalar(e.target, a) if kind == "scalar" else a
                  for a, kind in zip(arrays, e.input_kinds)]
        return [_to_mx(a, d) for a, d in zip(arrays, e.input_dtypes)], keys

    def prepare_cached(self, inputs: dict[str, Any], cache: dict) -> tuple[list, dict]:
        """:meth:`prepare`, reusing the MLX arrays an earlier kernel with the same argument
        signature made from the same ``inputs`` object (a search's candidates all share
        both). ``cache`` belongs to the caller; it keeps the last four signatures."""
        e = self.emitted
        key = (id(inputs), e.input_names, e.input_args, e.input_kinds, e.input_dtypes,
               e.input_shapes, repr(e.inout_decode), e.init_value, e.scalar_values)
        held = cache.get(key)
        if held is None or held[0] is not inputs:  # an id reused by a new dict
            if len(cache) >= 4:
                cache.pop(next(iter(cache)))
            arrays, keys = self.prepare(inputs)
            _mx().eval(arrays)
            held = cache[key] = (inputs, arrays, keys)
        return held[1], held[2]

    def launch(self, arrays: list) -> list:
        """One MLX call on prepared arrays (lazy: the caller evaluates)."""
        e = self.emitted
        kwargs = dict(inputs=arrays, grid=e.grid, threadgroup=e.threadgroup,
                      output_shapes=output_allocations(e),
                      output_dtypes=[mx_dtype(d) for d in e.output_dtypes],
                      init_value=e.init_value)
        if e.template:
            kwargs["template"] = [(n, _template_value(v)) for n, v in e.template]
        return unpad_outputs(e, self.kernel(**kwargs))

    def __call__(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        """Run once; outputs by spec argument name, decoded, as numpy arrays."""
        mx = _mx()
        arrays, keys = self.prepare(inputs)
        outs = self.launch(arrays)
        mx.eval(outs)
        return self.finish(outs, keys)

    def finish(self, outs: list, keys: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Numpy outputs by argument name with every encoded output decoded."""
        e = self.emitted
        arrays = []
        for arg, dtype, out in zip(e.output_args, e.output_dtypes, outs):
            if dtype == "bf16":  # numpy has no bfloat16: f32 values, or bits to decode
                out = out.view(mx_dtype("u16")) if e.encoding_for(arg) is not None \
                    else out.astype(mx_dtype("f32"))
            arrays.append(np.array(out))
        return decode_outputs(e, arrays, keys)


def prepare_inputs(e: Emitted, inputs: dict[str, Any]) -> tuple[list[np.ndarray], dict]:
    """Numpy input arrays in the kernel signature's order (spec data, 0-d scalars, XOR key
    arrays), and the key arrays by argument (needed again to decode). Shared by MLX and the
    CPU emulator so both run an emitted kernel with exactly the same arguments."""
    arrays, keys = [], {}
    for name, arg, kind, dtype, shape in zip(e.input_names, e.input_args, e.input_kinds,
                                             e.input_dtypes, e.input_shapes):
        if kind == "scalar":
            value = inputs.get(arg, e.scalar(arg))
            arrays.append(np.asarray(value).astype(_np_dtype(dtype)))
            continue
        if arg not in inputs:
            raise KirError(f"no value for argument {arg!r} of kernel {e.name!r}")
        data = np.asarray(inputs[arg])
        if tuple(data.shape) != tuple(shape) and data.size == int(np.prod(shape)):
            data = data.reshape(shape)
        if tuple(data.shape) != tuple(shape):
            raise KirError(f"argument {arg!r}: expected shape {tuple(shape)}, "
                           f"got {tuple(data.shape)}")
        if kind == "key":
            data = key_array(e.encoding_for(arg), data, e.init_value or 0.0)
            keys[arg] = data
        else:
            data = data.astype(_np_dtype(dtype), copy=False)
        arrays.append(data)
    for acc in e.accumulate:  # added to the kernel's sums afterwards
        keys[("initial", acc.arg)] = np.asarray(inputs[acc.arg]) if acc.init == "input" \
            else acc.init
    return arrays, keys


def decode_outputs(e: Emitted, outs: list[np.ndarray], keys: dict) -> dict[str, np.ndarray]:
    """Outputs by spec argument name, XOR-encoded ones decoded."""
    result = {}
    for arg, data in zip(e.output_args, outs):
        enc = e.encoding_for(arg)
        result[arg] = decode(enc, data, keys.get(arg)) if enc is not None else data
        if ("initial", arg) in keys:
            result[arg] = accumulated(result[arg], keys[("initial", arg)])
    return result


def time_kernel(kernel: MLXKernel, inputs: dict[str, Any], warmup: int = 3,
                repeat: int = 10, give_up_ms: float | None = None) -> Timing:
    """Time ``kernel`` on ``inputs`` with :func:`measure`, each launch evaluated with
    ``mx.eval`` before the clock stops (so MLX's launch overhead is included, as it is in
    the built-ins' times)."""
    mx = _mx()
    arrays, _ = kernel.prepare(inputs)
    mx.eval(arrays)
    return measure(lambda: mx.eval(kernel.launch(arrays)), warmup, repeat, give_up_ms)


def _np_dtype(name: str) -> np.dtype:
    return np.dtype({"u16": np.uint16, "bf16": np.float32}.get(name) or MX_DTYPES[name]
                    .replace("bool_", "bool"))


def _padded_scalar(target: str, value: np.ndarray) -> np.ndarray:
    """A 0-d scalar as the array MLX gets: itself, or padded (the kernel reads element 0)."""
    elements = allocated_elements(target, 1, value.itemsize)
    return value if elements == 1 else np.full(elements, value, value.dtype)


def _to_mx(data: np.ndarray, dtype: str):
    # numpy has no bfloat16: kir holds bf16 as f32 and MLX converts.
    array = _mx().array(data)
    return array.astype(mx_dtype("bf16")) if dtype == "bf16" else array


def _template_value(value):
    if isinstance(value, str) and value in MX_DTYPES:
        return mx_dtype(value)
    return value
