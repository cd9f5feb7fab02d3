"""A spec with its sizes fixed: launch numbers, inputs, tolerances and the reference call.

:class:`BoundSpec` is what :meth:`kir.spec.Spec.bind` returns; import it from ``kir.spec``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import sys
import traceback
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np

from kir import limits
from kir.errors import KirError, frame_place
from kir.ir import Launch
from kir.ir.types import ScalarType
from kir.spec.schema import ArgSpec, Spec, dtype_of, names_file_item
from kir.spec.sizeexpr import eval_size_expr

# (rtol, atol) when the spec gives none; integers compare exactly.
DEFAULT_TOLERANCES = {
    "f32": (1e-4, 1e-5), "f16": (1e-2, 1e-3), "bf16": (1e-2, 1e-3), "f64": (1e-9, 1e-12),
}

_REFERENCE_MODULES: dict[Path, ModuleType] = {}
RUN_COPIES = 4  # copies of each buffer a checked run holds at once, about


@dataclass(frozen=True)
class BoundSpec:
    """A :class:`Spec` with every size fixed; evaluates shapes, scalars and the launch."""

    spec: Spec
    sizes: dict[str, int]

    def _eval(self, expr: str, *keys: str) -> int | float:
        try:
            return eval_size_expr(expr, self.sizes)
        except KirError as exc:
            raise self.spec.error(exc.message, *keys, hint=exc.hint) from None

    def _count(self, expr: str, what: str, *keys: str) -> int:
        """A size expression that must come out a positive integer."""
        return self._integer(expr, what, *keys, positive=True)

    def _sizes_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.sizes.items())

    def _arg(self, name: str):
        if name not in self.spec.args:
            raise KirError(f"{self.spec.path.name} has no argument {name!r}")
        return self.spec.args[name]

    def shape(self, name: str) -> tuple[int, ...]:
        """The concrete shape of buffer argument ``name``."""
        arg = self._arg(name)
        return tuple(self._count(dim, f"argument {name!r} dimension {i}", "args", name, "shape")
                     for i, dim in enumerate(arg.shape))

    def scalar(self, name: str) -> int | float:
        """The value of scalar argument ``name``: int for integer dtypes, float for float
        dtypes (rounded to that precision), the expression's own type when no dtype is given."""
        arg = self._arg(name)
        if arg.value is None:
            raise KirError(f"{self.spec.path.name}: argument {name!r} is a buffer, not a scalar")
        value = self._eval(arg.value, "args", name, "value")
        if arg.dtype is None:
            return value
        dtype = dtype_of(arg.dtype)
        if dtype.is_float:
            largest = float(np.finfo(np.float32 if dtype.name == "bf16" else dtype.numpy).max)
            if math.isfinite(value) and abs(value) > largest:
                raise self.spec.error(f"scalar {name!r} of dtype {arg.dtype}: {arg.value!r} = "
                                      f"{value!r} is larger than {arg.dtype} holds", "args",
                                      name, "value")
            return float(np.asarray(value, dtype=dtype.numpy)) if dtype.name != "bf16" \
                else float(_round_bf16(np.asarray([value], np.float32))[0])
        if isinstance(value, float):
            if not value.is_integer():
                raise self.spec.error(f"scalar {name!r} of dtype {arg.dtype}: {arg.value!r} = "
                                      f"{value!r} is not an integer", "args", name, "value")
            value = int(value)
        if dtype.name != "bool":
            info = np.iinfo(dtype.numpy)
            if not int(info.min) <= value <= int(info.max):
                # the kernel would see it wrapped: a different number from the one written
                raise self.spec.error(f"scalar {name!r} of dtype {arg.dtype}: {arg.value!r} = "
                                      f"{value} does not fit in {arg.dtype}", "args", name,
                                      "value")
        return int(value)

    def range(self, name: str) -> tuple[float, float]:
        """The bounds of random values for argument ``name``: size expressions evaluated.
        Floats are drawn from [low, high); integers from low to high, both included."""
        arg = self._arg(name)
        low, high = (float(self._eval(b, "args", name, "range")) if isinstance(b, str)
                     else float(b) for b in arg.range)
        if not (math.isfinite(low) and math.isfinite(high)) or low > high:
            raise self.spec.error(f"argument {name!r}: range {list(arg.range)} is "
                                  f"[{low:g}, {high:g}] with sizes {self._sizes_text()}; it "
                                  "must be finite with low <= high", "args", name, "range")
        return low, high

    def offset(self, name: str) -> int:
        """Where the kernel's pointer for buffer ``name`` starts in it (0 without an
        ``offset``); it must leave the kernel at least one element."""
        arg = self._arg(name)
        if arg.offset is None:
            return 0
        value = self._eval(arg.offset, "args", name, "offset")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        size = math.prod(self.shape(name))
        if not isinstance(value, int) or not 0 <= value < size:
            raise self.spec.error(
                f"argument {name!r}: offset {arg.offset!r} = {value!r} with sizes "
                f"{self._sizes_text()}; it must be a whole number of elements from 0 to "
                f"{size - 1} (the buffer holds {size})", "args", name, "offset")
        return value

    @property
    def grid(self) -> tuple[int, int, int]:
        """Blocks per grid dimension."""
        return tuple(self._count(e, "launch grid", "launch", "grid")  # type: ignore[return-value]
                     for e in self.spec.grid)

    @property
    def block(self) -> tuple[int, int, int]:
        """Threads per block dimension."""
        return tuple(self._count(e, "launch block", "launch", "block")  # type: ignore[return-value]
                     for e in self.spec.block)

    @property
    def shared_bytes(self) -> int:
        """Dynamic shared memory in bytes (0 when the spec gives none)."""
        value = self._eval(self.spec.shared_bytes, "launch", "shared_bytes")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or value < 0:
            raise self.spec.error(f"launch shared_bytes = {value!r} with sizes "
                                  f"{self._sizes_text()}; it must be a non-negative integer",
                                  "launch", "shared_bytes")
        return value

    def template_values(self) -> dict[str, int | str]:
        """Values for template parameters: every size under its own name, overridden by the
        spec's ``templates`` table (the frontend picks the names its template declares); a
        dtype name (``T = "f16"``) or one of the file's types (``%Neg``, given as the name)
        is a ``typename`` parameter's type, ``&name`` a function given to a function
        parameter."""
        from kir.ir.types import SCALARS

        values: dict[str, int | str] = dict(self.sizes)
        for name, expr in self.spec.templates.items():
            if names_file_item(expr):  # a function keeps its '&' (the frontend binds by it)
                values[name] = expr[1:] if expr.startswith("%") else expr
            else:
                values[name] = expr if expr in SCALARS else \
                    self._integer(expr, f"template {name}", "templates", name)
        return values

    def _integer(self, expr: str, what: str, *keys: str, positive: bool = False) -> int:
        """A size expression that must come out an integer, a positive one when
        ``positive`` (a template value may be zero, a negative offset, a bool's 0 or 1)."""
        value = self._eval(expr, *keys)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or positive and value <= 0:
            raise self.spec.error(
                f"{what}: {expr!r} = {value!r} with sizes {self._sizes_text()}; it must be "
                f"{'a positive' if positive else 'an'} integer", *keys,
                hint="use ceil(...) or // for divisions")
        return value

    def for_kernel(self, kernel) -> "BoundSpec":
        """This spec with ``kernel``'s own workspace buffers (``Launch.scratch``: a rule's,
        or a ``__device__`` variable the CUDA code writes) as arguments of role ``scratch``:
        how a launcher learns their dtypes and shapes. The same spec when it has none."""
        if not kernel.launch.scratch:
            return self
        args = dict(self.spec.args)
        for name, count in kernel.launch.scratch:
            param = kernel.param(name)
            if param is None or not param.is_buffer:
                raise KirError(f"kernel {kernel.name}: scratch buffer {name!r} is not one of "
                               "its buffer parameters")
            args[name] = ArgSpec(name, param.type.elem.name, (count,), "scratch", 0.0)
        return BoundSpec(dataclasses.replace(self.spec, args=args), self.sizes)

    def launch(self) -> Launch:
        """The launch as kir IR: grid as the spec's expressions, block and shared bytes as
        numbers."""
        return Launch(self.spec.grid, self.block, self.shared_bytes)

    @property
    def outputs(self) -> list[str]:
        """Names of the out and inout buffers, in argument order."""
        return [a.name for a in self.spec.args.values() if a.role in ("out", "inout")]

    def tolerance(self, dtype: str | ScalarType) -> tuple[float, float]:
        """(rtol, atol) to compare outputs of ``dtype``: the spec's, else per-dtype defaults."""
        name = dtype if isinstance(dtype, str) else dtype.name
        rtol, atol = DEFAULT_TOLERANCES.get(name, (0.0, 0.0))
        return (rtol if self.spec.rtol is None else self.spec.rtol,
                atol if self.spec.atol is None else self.spec.atol)

    def memory_needed(self) -> int:
        """Bytes one checked run of the kernel needs at these sizes, about: every buffer
        ``RUN_COPIES`` times (the inputs, the reference's and the run's copies, the
        interpreter's memory, float64 temporaries), at 8 bytes an element at least."""
        total = 0
        for name, arg in self.spec.args.items():
            if arg.is_buffer:
                width = max(8, np.dtype(dtype_of(arg.dtype).numpy).itemsize)  # type: ignore[arg-type]
                total += math.prod(self.shape(name)) * width * RUN_COPIES
        return total

    def check_memory(self) -> None:
        """A KirError naming the sizes and the largest buffers when a run at these sizes
        would need more than the ``memory_fraction`` limit of the available memory."""
        available = limits.available_memory()
        needed = self.memory_needed()
        share = limits.current().memory_fraction
        if available is None or needed <= available * share:
            return
        buffers = sorted(((math.prod(self.shape(n)), n) for n, a in self.spec.args.items()
                          if a.is_buffer), reverse=True)[:3]
        largest = ", ".join(f"{n}: {count:,} elements" for count, n in buffers)
        raise self.spec.error(
            f"sizes {self._sizes_text()} need about {_gib(needed)} of memory to run and check "
            f"({largest}); {_gib(available)} is available", "sizes",
            hint="use smaller sizes (--size, or the spec's check sizes for a search); "
                 f"the estimate counts each buffer {RUN_COPIES} times (--limit "
                 "memory_fraction=... sets the share of the available memory it may use)")

    def make_inputs(self, seed: int = 0) -> dict[str, np.ndarray | int | float]:
        """Every argument, in order: random inputs, outputs filled with their init, scalars
        their value. The same seed gives the same arrays. Sizes whose run would not fit in
        memory are refused first (:meth:`check_memory`)."""
        self.check_memory()
        rng = np.random.default_rng(seed)
        out: dict[str, np.ndarray | int | float] = {}
        for arg in self.spec.args.values():
            if arg.null:
                continue  # passed as nullptr: the kernel never sees data
            if arg.is_scalar:
                out[arg.name] = self.scalar(arg.name)
                continue
            dtype = dtype_of(arg.dtype)  # type: ignore[arg-type]
            shape = self.shape(arg.name)
            if arg.init is None or arg.init == "input":
                out[arg.name] = _random(rng, dtype, shape, self.range(arg.name))
            elif arg.init == "none":
                # Poison: an element the kernel never writes fails validation.
                poison = np.nan if dtype.is_float else np.iinfo(dtype.numpy).min
                out[arg.name] = np.full(shape, poison, dtype=dtype.numpy)
            else:
                out[arg.name] = np.full(shape, arg.init, dtype=dtype.numpy)
        return out

    def reference(self, inputs: dict[str, Any]) -> dict[str, np.ndarray] | None:
        """Call the spec's ``ref(args, sizes)`` on copies of ``inputs``; its out/inout arrays
        (cast to their dtypes and checked against their shapes), or None without a
        reference."""
        if self.spec.reference is None:
            return None
        function = _reference_function(self.spec)
        args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
        args.update({a.name: None for a in self.spec.args.values() if a.null})
        seconds = limits.current().reference_s
        try:
            with limits.cpu_limit(seconds, self._too_slow):
                result = function(args, dict(self.sizes))
        except (KeyboardInterrupt, KirError):
            raise
        except BaseException as exc:  # the user's code (even sys.exit): report it, not a
            # kir traceback and not an exit code the reference chose
            raise KirError(f"{self.spec.path.name}: reference {self.spec.reference} raised "
                           f"{type(exc).__name__}: {exc}",
                           hint=_last_frame(exc)) from exc
        if not isinstance(result, dict):
            raise KirError(f"{self.spec.path.name}: reference {self.spec.reference} returned "
                           f"{type(result).__name__}, expected a dict of output arrays")
        outs = {}
        for name in self.outputs:
            if name not in result:
                returned = ", ".join(map(str, result)) or "nothing"
                raise KirError(f"{self.spec.path.name}: reference {self.spec.reference} did "
                               f"not return output {name!r} (returned: {returned})")
            array = np.asarray(result[name])
            shape = self.shape(name)
            if array.shape != shape:
                raise KirError(f"{self.spec.path.name}: reference {self.spec.reference} "
                               f"returned {name!r} of shape {array.shape}, the spec says {shape}")
            outs[name] = array.astype(dtype_of(self.spec.args[name].dtype).numpy)  # type: ignore
        return outs

    def _too_slow(self, overrun: limits.Overrun) -> KirError:
        """The error of a reference call that ran past its limit, located at the line it
        was running (in the reference's own file) when it was stopped."""
        loc, line = frame_place(limits.frame_in(overrun.where, str(reference_file(self.spec))))
        seconds = limits.current().reference_s
        return KirError(f"reference {self.spec.reference} did not return within "
                        f"{overrun.limit_text} (spec {self.spec.path.name}, sizes "
                        f"{self._sizes_text()})", loc, source_line=line,
                        hint=limits.limit_hint("reference_s", seconds)
                        + "; or give smaller sizes (--size, or the spec's check sizes)")


def _gib(count: int) -> str:
    return f"{count / 2**30:.1f} GiB" if count >= 2**28 else f"{count / 2**20:.0f} MiB"


def _random(rng: np.random.Generator, dtype: ScalarType, shape: tuple[int, ...],
            bounds: tuple[float, float]) -> np.ndarray:
    low, high = bounds
    if dtype.is_float:
        # f16/bf16 drawn in f32 then rounded, so one seed gives the same values at any width.
        values = rng.uniform(low, high, size=shape).astype(np.float32)
        if dtype.name == "bf16":
            return _round_bf16(values)
        return values.astype(dtype.numpy)
    if dtype.name == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    # Drawn in the type itself, the range clamped to it: a u64 range up to 2**64 - 1 (read
    # from TOML as a float that rounds past it) stays inside the type.
    limits = np.iinfo(dtype.numpy)
    low_int = min(max(math.ceil(low), int(limits.min)), int(limits.max))
    high_int = min(max(math.floor(high), low_int), int(limits.max))
    return rng.integers(low_int, high_int, size=shape, dtype=dtype.numpy, endpoint=True)


def _round_bf16(values: np.ndarray) -> np.ndarray:
    """Round f32 values to bfloat16 precision (nearest even), kept in f32 as kir holds bf16."""
    bits = values.astype(np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) \
        & np.uint32(0xFFFF0000)
    return rounded.view(np.float32)


def reference_file(spec: Spec, key: str = "reference") -> Path | None:
    """The file of the spec's reference module (``key``: "reference" or "reference_mlx"),
    beside the spec, or None without one."""
    name = getattr(spec, key)
    if name is None:
        return None
    module_name = name.split(":")[0]
    return spec.path.resolve().parent / (module_name.replace(".", "/") + ".py")


def validation_fingerprint(spec: Spec) -> str:
    """A hash of what judging a kernel against ``spec`` depends on: the spec's text
    (tolerances, ragged and check sizes, input ranges, ``init``, the reference's name) and the
    reference module's source. Two specs with the same fingerprint judge alike."""
    digest = hashlib.sha256(spec.text.encode())
    file = reference_file(spec)
    if file is not None:
        try:
            digest.update(b"\0reference\0" + file.read_bytes())
        except OSError:
            digest.update(b"\0reference missing\0" + str(file).encode())
    return digest.hexdigest()[:16]


def reference_function(spec: Spec, key: str = "reference") -> Callable[..., Any]:
    """The function the spec's ``reference`` (or ``reference_mlx``) names, its module
    imported from beside the spec under a private name."""
    return _reference_function(spec, key)


def _reference_function(spec: Spec, key: str = "reference") -> Callable[..., Any]:
    module_name, function_name = getattr(spec, key).split(":")  # type: ignore[union-attr]
    file = reference_file(spec, key)
    assert file is not None
    module = _REFERENCE_MODULES.get(file)
    if module is None:
        if not file.is_file():
            raise spec.error(f"{key} module {module_name!r} not found: tried {file}",
                             key, hint="the module file must sit beside the spec")
        # A private, path-derived name: two specs' refs.py in different folders never collide
        # and nothing is added to sys.path.
        unique = "_kir_ref_" + hashlib.sha1(str(file).encode()).hexdigest()[:12]
        loader_spec = importlib.util.spec_from_file_location(unique, file)
        module = importlib.util.module_from_spec(loader_spec)  # type: ignore[arg-type]
        sys.modules[unique] = module
        seconds = limits.current().reference_s

        def too_slow(overrun: limits.Overrun) -> KirError:
            loc, line = frame_place(limits.frame_in(overrun.where, str(file)))
            return KirError(f"importing reference module {file} did not finish within "
                            f"{overrun.limit_text}", loc, source_line=line,
                            hint=limits.limit_hint("reference_s", seconds))
        try:
            with limits.cpu_limit(seconds, too_slow):
                loader_spec.loader.exec_module(module)  # type: ignore[union-attr]
        except (KeyboardInterrupt, KirError):
            del sys.modules[unique]
            raise
        except BaseException as exc:  # a module-level sys.exit() included
            del sys.modules[unique]
            raise spec.error(f"importing {key} module {file} failed: "
                             f"{type(exc).__name__}: {exc}", key,
                             hint=_last_frame(exc)) from None
        _REFERENCE_MODULES[file] = module
    function = getattr(module, function_name, None)
    if not callable(function):
        raise spec.error(f"{key} function {function_name!r} not found in {file}",
                         key, hint="define def "
                                   f"{function_name}(args: dict, sizes: dict) -> dict")
    return function


def _last_frame(exc: BaseException) -> str | None:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    frame = frames[-1]
    return f"at {frame.filename}:{frame.lineno}: {frame.line}"
