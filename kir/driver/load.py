"""From a file on disk to a kernel: CUDA source or IR text, with its spec bound to sizes.

This is the one place that wires the frontend, the IR parser and the spec together; the CLI,
the rule tester and the search all start here.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from kir.errors import KirError
from kir.ir import Kernel
from kir.spec import BoundSpec, Spec, find_spec, load_spec

CUDA_SUFFIXES = (".cu", ".cuh")
IR_SUFFIXES = (".kir",)


@dataclass(frozen=True)
class Loaded:
    """A kernel ready to run: the IR, its bound spec (None without a spec), and where it came
    from (``path``; ``source`` holds the file's text)."""

    kernel: Kernel
    bound: BoundSpec | None
    path: Path
    source: str
    # Folders searched for `#include "..."` headers after the source's own (-I, the spec's).
    include_dirs: tuple[Path, ...] = ()

    @property
    def spec(self) -> Spec | None:
        return self.bound.spec if self.bound else None

    def tile_sizes(self) -> dict[str, int]:
        """The spec sizes a search may change to re-tile the kernel (like a Triton config):
        those that shape the launch's threads or shared memory or a template, but no
        buffer's shape and no scalar argument's value (the problem stays the same), for a
        kernel read from CUDA source (re-tiling lowers it again). Name → current value."""
        if self.bound is None or self.path.suffix not in CUDA_SUFFIXES:
            return {}
        from kir.spec.shrink import structural_sizes

        spec = self.bound.spec
        used = set()
        for arg in spec.args.values():
            for text in (*arg.shape, arg.value or ""):
                used.update(re.findall(r"[A-Za-z_]\w*", str(text)))
        return {name: self.bound.sizes[name] for name in sorted(structural_sizes(spec) - used)}

    def retiled(self, sizes: dict[str, int]) -> Kernel:
        """The kernel lowered again from its source with ``sizes`` for some of its
        :meth:`tile_sizes`; its launch grid is written with those values, so the kernel stays
        right when the spec's other sizes change (validation evaluates the grid with them)."""
        if not set(sizes) <= set(self.tile_sizes()):
            raise KirError(f"cannot re-tile {', '.join(sorted(set(sizes)))}: not tile sizes "
                           f"of {self.path.name}")
        again = load_kernel(self.path, spec_path=self.bound.spec.path,
                            sizes={**self.bound.sizes, **sizes}, kernel_name=self.kernel.name,
                            include_dirs=self.include_dirs)
        grid = tuple(_substitute(expr, sizes) for expr in again.kernel.launch.grid)
        launch = dataclasses.replace(again.kernel.launch, grid=grid)
        return dataclasses.replace(again.kernel, launch=launch)


def _substitute(expr: str, values: dict[str, int]) -> str:
    """A size expression with some names replaced by their values."""
    for name, value in values.items():
        expr = re.sub(rf"\b{re.escape(name)}\b", str(value), expr)
    return expr


def parse_size_overrides(items: list[str] | None, option: str = "--size") -> dict[str, int]:
    """``["N=4096", "D=64"]`` → ``{"N": 4096, "D": 64}``; bad items raise a KirError naming
    ``option`` (the flag they came from)."""
    sizes: dict[str, int] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise KirError(f"bad {option} {item!r}",
                           hint=f"write {option} NAME=VALUE, e.g. {option} N=4096")
        try:
            sizes[name.strip()] = int(value)
        except ValueError:
            raise KirError(f"bad {option} {item!r}: {value!r} is not an integer") from None
    return sizes


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise KirError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise KirError(f"{path} is a directory, not a kernel file") from None
    except OSError as exc:
        raise KirError(f"cannot read {path}: {exc.strerror}") from None


def spec_for(path: Path, spec_path: str | Path | Spec | None) -> Spec | None:
    """The spec named with ``--spec`` (or given as a loaded :class:`Spec`), else the one
    beside the source, else None."""
    if isinstance(spec_path, Spec):
        return spec_path
    if spec_path is not None:
        return load_spec(Path(spec_path))
    found = find_spec(path)
    return load_spec(found) if found else None


def load_kernel(
    path: str | Path,
    *,
    spec_path: str | Path | Spec | None = None,
    sizes: dict[str, int] | None = None,
    kernel_name: str | None = None,
    include_dirs: Sequence[str | Path] = (),
) -> Loaded:
    """Load ``path`` (``.cu`` CUDA or ``.kir`` IR text) with its spec bound to ``sizes``;
    ``include_dirs`` (``-I``) and the spec's ``include`` list are searched for headers."""
    path = Path(path)
    text = read_text(path)
    spec = spec_for(path, spec_path)
    bound = spec.bind(sizes or {}) if spec else None
    if sizes and not spec:
        raise KirError(f"--size given but {path} has no spec",
                       hint=f"write {path.with_suffix('.kir.toml').name} beside it or pass --spec")
    if path.suffix in IR_SUFFIXES:
        from kir.ir.parser import parse_kernel

        # IR text carries its own launch (rules may have changed it); the spec's sizes are
        # still what its grid expressions and scalar arguments are evaluated with.
        kernel = parse_kernel(text, filename=str(path), locate_unmarked=True)
        if bound is not None:
            from kir.spec.index_range import check_index_range

            check_spec_fits(kernel, bound.spec)
            check_index_range(kernel, bound)
        return Loaded(kernel, bound, path, text)
    if path.suffix not in CUDA_SUFFIXES:
        raise KirError(f"don't know how to read {path.name}",
                       hint="kir reads CUDA (.cu, .cuh) and kir IR text (.kir)")
    from kir.frontends.cuda import load_cuda

    dirs = tuple(Path(d) for d in include_dirs) + tuple(spec.include_dirs() if spec else ())
    name = kernel_name or (spec.kernel if spec else None)
    kernel = load_cuda(
        text,
        str(path),
        kernel=name,
        template_values=bound.template_values() if bound else {},
        launch=bound.launch() if bound else None,
        include_dirs=dirs,
        args=arg_facts(spec) if spec else None,
    )
    if bound is not None:
        from kir.spec.index_range import check_index_range
        from kir.spec.offsets import apply_offsets

        check_spec_fits(kernel, bound.spec)
        check_spec_names(text, path, kernel, bound.spec, dirs)
        kernel = apply_offsets(kernel, bound)  # launch-time pointer offsets (spec `offset`)
        check_index_range(kernel, bound)  # before any input is allocated or run
    return Loaded(kernel, bound, path, text, dirs)


def arg_facts(spec: Spec):
    """What the frontend needs of the spec's arguments (dtypes; which are null)."""
    from kir.frontends.cuda import ArgFacts

    return ArgFacts({a.name: a.dtype for a in spec.args.values() if not a.null},
                    frozenset(a.name for a in spec.args.values() if a.null))


def check_spec_names(text: str, path: Path, kernel: Kernel, spec: Spec,
                     include_dirs: Sequence[Path] = ()) -> None:
    """Raise a KirError at a spec argument that names no parameter of the kernel (a
    misspelling, or a spec written for another kernel): arguments bind by name, so the
    spec's order does not matter, but every name must be the kernel's."""
    from kir.frontends.cuda import kernel_params

    written = kernel_params(text, str(path), kernel.name, include_dirs)
    names = [p.name for p in written] or [p.name for p in kernel.params]
    for arg in spec.args:
        if arg not in names:
            from kir.spec.schema import _did_you_mean

            raise spec.error(f"argument {arg!r} is not a parameter of kernel "
                             f"'{kernel.name}' (its parameters: {', '.join(names)})", "args",
                             arg, hint=_did_you_mean(arg, names)
                             or "arguments bind to the kernel's parameters by name")


def check_spec_fits(kernel: Kernel, spec: Spec) -> None:
    """Raise a KirError at the spec's argument when its dtype or kind (buffer or scalar)
    disagrees with the kernel's parameter: an ``f16`` spec for a ``float*`` would otherwise
    make inputs of one type and run the kernel on them converted to another."""
    from kir.ir.types import PointerType, VectorType

    for param in kernel.params:
        arg = spec.args.get(param.name)
        if arg is None:
            continue  # a missing argument is reported where the inputs are bound
        if param.is_buffer != arg.is_buffer:
            what = "a buffer (pointer)" if param.is_buffer else "a scalar"
            fix = 'give it shape = [...]' if param.is_buffer else 'give it value = "..."'
            raise spec.error(f"argument {param.name!r}: the kernel's parameter is {what} "
                             f"({param.type}), the spec says otherwise", "args", param.name,
                             hint=fix)
        elem = param.type.elem if isinstance(param.type, PointerType) else param.type
        if isinstance(elem, VectorType):
            elem = elem.elem  # a float4* buffer holds f32 elements
        if arg.dtype is not None and arg.dtype != getattr(elem, "name", arg.dtype):
            raise spec.error(f"argument {param.name!r}: dtype {arg.dtype!r} in the spec, but "
                             f"the kernel's parameter is {param.type}", "args", param.name,
                             "dtype", hint=f'write dtype = "{elem}" (kir does not convert '
                                           "between them)")

