"""From a file on disk to a kernel: CUDA source or IR text, with its spec bound to sizes.

This is the one place that wires the frontend, the IR parser and the spec together; the CLI,
the rule tester and the search all start here.

IR text kir writes (``kir parse``, ``kir apply``, a search's ``best.kir``) starts with
:func:`ir_header`: a ``# spec: PATH`` comment naming the spec the kernel was loaded with, so
the dump can be edited and run on its own, or, without a spec, a ``# launch: placeholder``
comment. Which launch a ``.kir`` runs with: its own (rules change launches), unless it is a
placeholder, in which case the spec's; either way, when the two differ a note says which
(:attr:`Loaded.notes`, printed by the CLI).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from kir.errors import KirError, Loc, source_line_of
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
    notes: tuple[str, ...] = ()  # what the user should know (e.g. which launch is used)

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
    """A kernel file's text (a UTF-8 byte order mark dropped; bytes that are not UTF-8
    replaced, for the frontend to report where they are)."""
    try:
        return path.read_text(encoding="utf-8-sig", errors="replace")
    except FileNotFoundError:
        raise KirError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise KirError(f"{path} is a directory, not a kernel file") from None
    except OSError as exc:
        raise KirError(f"cannot read {path}: {exc.strerror}") from None


SPEC_COMMENT = re.compile(r"^#[ \t]*spec:[ \t]*(\S.*?)[ \t]*$")
PLACEHOLDER_COMMENT = "# launch: placeholder"


def ir_header(loaded: "Loaded") -> str:
    """The comment lines kir writes before a kernel's IR text so the dump reads back alone:
    the spec it was loaded with, or that its launch is a placeholder (no spec gave one)."""
    if loaded.spec is not None:
        # As it was found or given: absolute stays absolute; relative (to the working
        # directory) is tried from the dump's folder, then from the working directory.
        return f"# spec: {loaded.spec.path}\n"
    return (f"{PLACEHOLDER_COMMENT} (no spec): grid and block below are not the kernel's; "
            "a spec's launch replaces them\n")


def _header_lines(text: str) -> list[tuple[int, str]]:
    """The comment lines before the first line of IR, with their line numbers."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        out.append((number, stripped))
    return out


def named_spec(text: str, path: Path) -> Path | None:
    """The spec a dump's ``# spec:`` comment names (relative paths from the dump's folder,
    then from the working directory); a KirError there when it names one that is missing."""
    for number, line in _header_lines(text):
        found = SPEC_COMMENT.match(line)
        if not found:
            continue
        named = Path(found.group(1))
        tries = [named] if named.is_absolute() else [path.parent / named, named]
        for candidate in tries:
            if candidate.is_file():
                return candidate
        raise KirError(f"the spec this IR was dumped with, {named}, is not there",
                       Loc(str(path), number, 1), source_line=source_line_of(text, number),
                       hint="pass --spec, or fix the path in the comment")
    return None


def spec_for(path: Path, spec_path: str | Path | Spec | None, text: str = "") -> Spec | None:
    """The spec named with ``--spec`` (or given as a loaded :class:`Spec`), else the one
    beside the source, else (IR text) the one its ``# spec:`` comment names, else None."""
    if isinstance(spec_path, Spec):
        return spec_path
    if spec_path is not None:
        return load_spec(Path(spec_path))
    found = find_spec(path)
    if found is None and path.suffix in IR_SUFFIXES:
        found = named_spec(text, path)
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
    spec = spec_for(path, spec_path, text)
    bound = spec.bind(sizes or {}) if spec else None
    if sizes and not spec:
        raise KirError(f"--size given but {path} has no spec",
                       hint=f"write {path.with_suffix('.kir.toml').name} beside it or pass --spec")
    if path.suffix in IR_SUFFIXES:
        from kir.ir.parser import parse_kernel

        kernel = parse_kernel(text, filename=str(path), locate_unmarked=True)
        notes: tuple[str, ...] = ()
        if bound is not None:
            from kir.spec.index_range import check_index_range

            kernel, notes = _choose_launch(kernel, bound, text, path)
            check_spec_fits(kernel, bound.spec)
            check_index_range(kernel, bound)
        return Loaded(kernel, bound, path, text, notes=notes)
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

        check_spec_names(text, path, kernel, bound.spec, dirs)  # a misspelling first
        check_spec_fits(kernel, bound.spec)
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
    names = [n for p in written for n in p.argument_names]
    # and what the kernel takes beyond its signature: the __constant__ memory it reads
    names += [p.name for p in kernel.params if p.name not in names]
    for arg in spec.args:
        if arg not in names:
            from kir.spec.schema import _did_you_mean

            raise spec.error(f"argument {arg!r} is not a parameter of kernel "
                             f"'{kernel.name}' (its parameters: {', '.join(names)})", "args",
                             arg, hint=_did_you_mean(arg, names)
                             or "arguments bind to the kernel's parameters by name")


def _choose_launch(kernel: Kernel, bound: BoundSpec, text: str,
                   path: Path) -> tuple[Kernel, tuple[str, ...]]:
    """The launch a ``.kir`` runs with, and a note when the IR's and the spec's differ.

    The IR's own launch wins (a rule such as coarsen-threads or resize-block changed it, and
    the IR's body depends on it), unless the dump says it is a placeholder (it was parsed
    without a spec): then the spec's. The spec's sizes are what the grid expressions are
    evaluated with either way; an expression that does not evaluate is an error at the
    launch line."""
    spec_launch = bound.launch()
    header = [line for _, line in _header_lines(text)]
    if any(line.startswith(PLACEHOLDER_COMMENT) for line in header):
        kernel = dataclasses.replace(kernel, launch=spec_launch)
        return kernel, (f"{path}: its launch was a placeholder (dumped without a spec): the "
                        f"spec's is used ({_launch_text(spec_launch)})",)
    _check_grid(kernel, bound, text, path)
    ours, theirs = _launch_text(kernel.launch), _launch_text(spec_launch)
    if ours == theirs:
        return kernel, ()
    return kernel, (f"{path}: the IR's launch ({ours}) differs from the spec's ({theirs}): the "
                    f"IR's is used (edit its grid=/block= line to change it)",)


def _launch_text(launch) -> str:
    grid = ", ".join(re.sub(r"\s+", "", str(g)) for g in launch.grid)
    return f"grid ({grid}), block {tuple(launch.block)}, shared_bytes {launch.shared_bytes}"


def _check_grid(kernel: Kernel, bound: BoundSpec, text: str, path: Path) -> None:
    """Each grid expression of an IR launch evaluates, with the spec's sizes, to a positive
    whole number; else a KirError at the launch line of the IR text."""
    from kir.spec.sizeexpr import eval_size_expr

    for expr in kernel.launch.grid:
        problem = None
        try:
            value = eval_size_expr(expr, bound.sizes)
        except KirError as exc:
            problem = exc.message
        else:
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if not isinstance(value, int) or value <= 0:
                problem = (f"launch grid {expr!r} = {value!r} with sizes "
                           f"{', '.join(f'{k}={v}' for k, v in bound.sizes.items())}: it must "
                           "be a positive whole number of blocks")
        if problem:
            at = text.find("grid=")
            line = text.count("\n", 0, at) + 1 if at >= 0 else 1
            col = at - (text.rfind("\n", 0, at) + 1) + 1 if at >= 0 else 1
            raise KirError(problem, Loc(str(path), line, col),
                           source_line=source_line_of(text, line) if at >= 0 else None)


def _missing_argument(kernel: Kernel, param, spec: Spec) -> KirError:
    """The spec gives no argument for ``param``: say where the parameter comes from (the
    signature, a struct's field, ``__constant__`` memory) and what to add."""
    kind = "buffer" if param.is_buffer else "scalar"
    add = (f'{param.name} = {{ dtype = "...", shape = [...] }}' if param.is_buffer
           else f'{param.name} = {{ value = "...", dtype = "{param.type}" }}')
    message = (f"kernel {kernel.name} takes the {kind} {param.name!r} ({param.type}), which "
               "the spec's [args] does not give")
    hint = (f"add {add} to {spec.path.name} (a struct parameter's field p_f may be written "
            "p.f; __constant__ memory is named as its symbol)")
    if param.loc is not None:
        return KirError(message, param.loc, hint=hint)
    return spec.error(message, "args", hint=hint)


def check_spec_fits(kernel: Kernel, spec: Spec) -> None:
    """Raise a KirError at the spec's argument when its dtype or kind (buffer or scalar)
    disagrees with the kernel's parameter: an ``f16`` spec for a ``float*`` would otherwise
    make inputs of one type and run the kernel on them converted to another."""
    from kir.ir.types import PointerType, VectorType

    workspace = {name for name, _ in kernel.launch.scratch}  # the launch sizes these
    for param in kernel.params:
        arg = spec.args.get(param.name)
        if arg is None and param.name in workspace:
            continue
        if arg is None:
            raise _missing_argument(kernel, param, spec)
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

