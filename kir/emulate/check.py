"""``kir check``: run a hand-written MLX kernel wrapper on the emulator, at several shapes,
against a reference, with every check the emulator has.

For each shape case (the user's, and a ragged variant of each that kir adds: every input's last
dimension one shorter, so threadgroups at the edge are partial) the wrapper and the reference
get the same random inputs. Every ``mx.fast.metal_kernel`` the wrapper's module builds (at
import or later) is an emulated kernel in checked mode, so each launch reports:

* out-of-bounds accesses on every buffer, reads of outputs before any write, threadgroup
  memory read unwritten or raced on (the checked build, at the Metal line);
* barriers reached by part of a threadgroup (the emulator's scheduler, at the barrier's line);
* output elements no thread wrote (outputs are NaN-poisoned; with MLX's grid in threads a
  grid given in threadgroups leaves most of them unwritten), at the line that stores them;
* threadgroups over the thread or threadgroup-memory limit of an M1-M4 chip;
* outputs that differ from the reference.
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from kir.backends.emulate.checked import Finding
from kir.backends.emulate.source import mask
from kir.backends.emulate.toolchain import EmulatorError
from kir.emulate.arrays import is_mlx_array, to_numpy
from kir.emulate.limits import chip_list, over_memory_limit
from kir.emulate.patch import emulate_metal_kernels
from kir.emulate.session import CheckSession, LaunchRecord
from kir.errors import KirError, Loc, source_line_of

Shapes = tuple[tuple[int, ...], ...]  # one shape per argument of the wrapper
DEFAULT_SHAPES: tuple[Shapes, ...] = (((4096,),), ((1000,),), ((33,),))
TOLERANCES = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}


@dataclass(frozen=True)
class Case:
    """One set of input shapes; ``derived`` when kir added it (a ragged variant)."""

    shapes: Shapes
    derived: bool = False

    def __str__(self) -> str:
        text = ", ".join("x".join(map(str, shape)) or "()" for shape in self.shapes)
        return text + (" (ragged variant)" if self.derived else "")


@dataclass
class CaseResult:
    case: Case
    status: str  # "ok", "failed", "refused" (the wrapper rejected these shapes)
    findings: list[Finding] = field(default_factory=list)
    note: str = ""


@dataclass
class CheckResult:
    cases: list[CaseResult]

    @property
    def ok(self) -> bool:
        return all(result.status != "failed" for result in self.cases)

    def findings(self) -> list[tuple[Finding, list[Case]]]:
        """Each distinct finding once, with the cases it was seen in."""
        seen: dict[tuple, tuple[Finding, list[Case]]] = {}
        for result in self.cases:
            for finding in result.findings:
                key = (finding.kind, finding.loc, re.sub(r"\d+", "#", finding.message))
                seen.setdefault(key, (finding, []))[1].append(result.case)
        return list(seen.values())


def parse_shapes(texts: Sequence[str]) -> list[Shapes]:
    """``["1000", "8x100,100"]`` -> [((1000,),), ((8, 100), (100,))]: arguments are separated
    by commas, dimensions by ``x``; ``()`` is a 0-d argument."""
    cases = []
    for text in texts:
        shapes = []
        for part in text.split(","):
            part = part.strip()
            if part in ("()", ""):
                shapes.append(())
                continue
            if not re.fullmatch(r"\d+(x\d+)*", part):
                raise KirError(f"--shapes {text!r}: {part!r} is not a shape",
                               hint="write dimensions joined by x and arguments by commas, "
                                    "e.g. --shapes 8x4096 or --shapes 64x100,100")
            shapes.append(tuple(int(n) for n in part.split("x")))
        cases.append(tuple(shapes))
    return cases


def with_ragged_variants(cases: Sequence[Shapes]) -> list[Case]:
    """The user's cases, each followed by its ragged variant (every last dimension above 1 one
    shorter) unless that is already a case."""
    out = [Case(shapes) for shapes in cases]
    given = set(cases)
    for shapes in cases:
        ragged = tuple(shape[:-1] + (shape[-1] - 1,) if shape and shape[-1] > 1 else shape
                       for shape in shapes)
        if ragged != shapes and ragged not in given:
            given.add(ragged)
            out.insert(out.index(Case(shapes)) + 1, Case(ragged, derived=True))
    return out


def load_function(target: str, default_path: Path | None = None,
                  modules: dict[Path, Any] | None = None) -> tuple[Callable, Path]:
    """``path/to/module.py:NAME`` (or ``NAME`` in ``default_path``'s module) -> the function.
    Modules are imported afresh, once per ``modules`` cache (one check run)."""
    path_text, _, name = target.rpartition(":")
    if not path_text:
        if default_path is None:
            raise KirError(f"{target!r}: name a function as MODULE.py:FUNCTION")
        path = default_path
    else:
        path = Path(path_text)
    if not name.isidentifier():
        raise KirError(f"{target!r}: {name!r} is not a function name",
                       hint="write MODULE.py:FUNCTION")
    if not path.is_file():
        raise KirError(f"{path}: no such file", hint="write MODULE.py:FUNCTION")
    modules = {} if modules is None else modules
    if path.resolve() not in modules:
        modules[path.resolve()] = _import(path)
    function = getattr(modules[path.resolve()], name, None)
    if not callable(function):
        raise KirError(f"{path} has no function {name!r}")
    return function, path


def _import(path: Path) -> Any:
    """Import a module from its file (its folder first on sys.path, as ``python path`` does)."""
    key = f"kir_check_{path.stem}"
    spec = importlib.util.spec_from_file_location(key, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))
    try:
        sys.modules[key] = module
        spec.loader.exec_module(module)
    except KirError:
        raise
    except Exception as error:
        raise KirError(f"{path}: importing it raised {type(error).__name__}: {error}") from None
    finally:
        sys.modules.pop(key, None)
        sys.path.remove(str(path.resolve().parent))
    return module


def random_inputs(shapes: Shapes, dtype: str, seed: int) -> list[Any]:
    """MLX arrays of normal values (uniform integers for integer dtypes)."""
    import mlx.core as mx

    keys = mx.random.split(mx.random.key(seed), len(shapes) + 1)
    out = []
    for k, shape in zip(keys, shapes):
        if "int" in dtype:
            out.append(mx.random.randint(-8, 8, shape, key=k).astype(getattr(mx, dtype)))
        else:
            out.append(mx.random.normal(shape, key=k).astype(getattr(mx, dtype)))
    return out


def run_check(function: Callable, reference: Callable, cases: Sequence[Case], *,
              session: CheckSession, dtype: str = "float32", seed: int = 0,
              rtol: float | None = None, atol: float | None = None,
              progress: Callable[[CaseResult], None] | None = None) -> CheckResult:
    """Run every case; the wrapper's kernels must have been built inside
    ``emulate_metal_kernels(session=session)``."""
    default_rtol, default_atol = TOLERANCES.get(dtype, (0.0, 0.0))
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    results = []
    with emulate_metal_kernels(session=session, force=True):
        for number, case in enumerate(cases):
            result = run_case(function, reference, case, session, dtype, seed + number, rtol,
                              atol)
            results.append(result)
            if progress:
                progress(result)
    return CheckResult(results)


def run_case(function: Callable, reference: Callable, case: Case, session: CheckSession,
             dtype: str, seed: int, rtol: float, atol: float) -> CaseResult:
    inputs = random_inputs(case.shapes, dtype, seed)
    first = len(session.launches)
    try:
        got = as_arrays(function(*inputs))
    except EmulatorError as error:
        # What a failed launch left behind (unwritten outputs, ...) follows from its failure.
        launches = [r for r in session.launches[first:] if r.error is None]
        findings = [error_finding(error, session.launches[first:])] + launch_findings(launches)
        return CaseResult(case, "failed", dedupe(findings))
    except Exception as error:  # the wrapper's own code
        text = f"{type(error).__name__}: {error}"
        if len(session.launches) == first and case.derived:
            return CaseResult(case, "refused", note=text)
        finding = Finding("wrapper-error", f"the wrapper raised {text}")
        return CaseResult(case, "failed", [finding])
    launches = session.launches[first:]
    try:
        want = as_arrays(reference(*inputs))
    except Exception as error:
        raise KirError(f"the reference raised {type(error).__name__}: {error} at shapes "
                       f"{case}") from None
    findings = launch_findings(launches)
    # Outputs left unwritten or read before written are NaN where they differ: said already.
    explained = any(f.kind in ("unwritten", "uninit-output") for f in findings)
    findings += compare(got, want, launches, rtol, atol, nan_explained=explained)
    if not launches:
        findings.append(Finding("no-launch", "the wrapper launched no Metal kernel",
                                hint="kir check runs kernels made by mx.fast.metal_kernel"))
    findings = dedupe(findings)
    return CaseResult(case, "failed" if findings else "ok", findings)


def as_arrays(value: Any) -> list[np.ndarray]:
    """A function's result (an array, or a tuple/list of arrays) as numpy arrays."""
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    return [np.asarray(to_numpy(item)) if is_mlx_array(item) else np.asarray(item)
            for item in items]


def dedupe(findings: list[Finding]) -> list[Finding]:
    out: dict[tuple, Finding] = {}
    for finding in findings:
        out.setdefault((finding.kind, finding.loc, finding.message), finding)
    return list(out.values())


def launch_findings(launches: Sequence[LaunchRecord]) -> list[Finding]:
    """The checked build's findings, unwritten outputs and threadgroup-memory limits."""
    found: list[Finding] = []
    for record in launches:
        found += record.findings
        for name, (count, first) in record.unwritten.items():
            found.append(unwritten_finding(record, name, count, first))
        regions = {(file, line): size for size, file, line in record.threadgroup_memory}
        total = sum(regions.values())
        if over_memory_limit(total):
            (file, line), size = max(regions.items(), key=lambda item: item[1])
            text = source_line_of(record.source, line) if file == record.body_file else None
            found.append(Finding(
                "threadgroup-memory",
                f"kernel `{record.kernel}` declares {total} bytes of threadgroup memory, more "
                f"than {chip_list(over_memory_limit(total))} allows "
                f"({min(c.threadgroup_memory for c in over_memory_limit(total))} bytes)",
                Loc(file, line, 1 + len(text) - len(text.lstrip()) if text else 1), text,
                "MLX cannot build the pipeline on these chips: use smaller tiles"))
    return found


def unwritten_finding(record: LaunchRecord, name: str, count: int, first: int) -> Finding:
    index = record.output_names.index(name)
    elements = math.prod(record.output_shapes[index])
    threads = math.prod(record.grid)
    site = f" (launched at {record.call_site.file}:{record.call_site.line})" \
        if record.call_site else ""
    message = (f"kernel `{record.kernel}` left {count} of {elements} elements of `{name}` "
               f"unwritten (the first: element {first}){site}")
    hint = "every output element must be written: MLX does not initialise outputs unless " \
           "init_value is given"
    if threads < elements <= threads * math.prod(record.threadgroup):
        hint = (f"grid={record.grid} launches {threads} threads in all: MLX's grid counts "
                "threads (Metal's dispatchThreads), not threadgroups; pass the number of "
                "threads, e.g. grid=(n, 1, 1) with threadgroup=(256, 1, 1)")
    line = store_line(record.source, name)
    if line is None:
        return Finding("unwritten", message, record.call_site, record.call_line, hint)
    text = source_line_of(record.source, line)
    loc = Loc(record.body_file, line, 1 + len(text) - len(text.lstrip()) if text else 1)
    return Finding("unwritten", message, loc, text, hint)


def store_line(source: str, name: str) -> int | None:
    """The first line of ``source`` that stores into ``name`` (an element assignment or an
    atomic on an element)."""
    pattern = re.compile(rf"\b{re.escape(name)}\s*\[[^;]*?\]\s*(?:[-+*/|&^]?=)(?!=)"
                         rf"|atomic_\w+\(\s*&\s*{re.escape(name)}\s*\[")
    for number, line in enumerate(mask(source).splitlines(), start=1):
        if pattern.search(line):
            return number
    return None


def error_finding(error: EmulatorError, launches: Sequence[LaunchRecord]) -> Finding:
    """A launch that failed (bounds, barrier, limit, crash, ...) as a finding."""
    record = launches[-1] if launches else None
    loc, text = error.loc, error.source_line
    if loc is None and record is not None:
        loc, text = record.call_site, record.call_line
    return Finding(error.kind, error.message, loc, text, error.hint)


def compare(got: list[np.ndarray], want: list[np.ndarray], launches: Sequence[LaunchRecord],
            rtol: float, atol: float, nan_explained: bool = False) -> list[Finding]:
    """Output-by-output comparison with the reference (NaN only matches NaN). With
    ``nan_explained``, differences that are all NaN in the output are left out."""
    if len(got) != len(want):
        return [Finding("mismatch", f"the wrapper returned {len(got)} arrays, the reference "
                                    f"{len(want)}")]
    found = []
    for index, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            found.append(Finding("mismatch", f"output {index} has shape {g.shape}, the "
                                             f"reference's {w.shape}"))
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        close = np.isclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True)
        if close.all():
            continue
        bad = np.flatnonzero(~close)
        if nan_explained and np.isnan(g64.flat[bad]).all():
            continue
        first = int(bad[0])
        where = np.unravel_index(first, g.shape) if g.ndim else ()
        message = (f"output {index} differs from the reference at {bad.size} of {g.size} "
                   f"elements (first at {tuple(int(i) for i in where)}: {float(g.flat[first]):.6g} "
                   f"against {float(w.flat[first]):.6g}; rtol={rtol:g}, atol={atol:g})")
        loc, text = None, None
        for record in reversed(launches):
            if g.shape in record.output_shapes:
                name = record.output_names[record.output_shapes.index(g.shape)]
                line = store_line(record.source, name)
                if line is not None:
                    text = source_line_of(record.source, line)
                    loc = Loc(record.body_file, line, 1 + len(text) - len(text.lstrip()))
                    message += f"; kernel `{record.kernel}` writes it here"
                break
        found.append(Finding("mismatch", message, loc, text))
    return found
