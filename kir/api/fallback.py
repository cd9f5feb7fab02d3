"""The generated module's fallback: the spec's ``reference_mlx`` copied into it.

The module must not import kir or the user's ``refs.py`` (it is shipped on its own), so the
named function is copied as source, with what it uses from its file: the top-level imports,
functions, classes and assignments it needs, found by following names from the function
(in file order). Before it is copied it is run on MLX at the spec's sizes and compared with
the spec's numpy reference, so a wrong fallback is caught where it is written, not where a
user's machine lacks a GPU.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import numpy as np

from kir.backends.module import Fallback
from kir.errors import KirError
from kir.spec.bound import reference_file, reference_function


def fallback_for(spec) -> Fallback | None:
    """The spec's ``reference_mlx`` as a :class:`Fallback`, or None when it names none."""
    if spec.reference_mlx is None:
        return None
    reference_function(spec, "reference_mlx")  # imports, so a broken module is reported
    file = reference_file(spec, "reference_mlx")
    function = spec.reference_mlx.split(":")[1]
    source = Path(file).read_text(encoding="utf-8")
    return Fallback(extract(source, function, str(file)), function,
                    f"{file.name}:{function}")


def extract(source: str, function: str, filename: str = "<reference>") -> str:
    """The statements of ``source`` that ``function`` needs, in their order, as source."""
    tree = ast.parse(source, filename)
    defines: dict[str, list[int]] = {}
    for i, stmt in enumerate(tree.body):
        for name in _defined(stmt):
            defines.setdefault(name, []).append(i)
    if function not in defines:
        raise KirError(f"{filename}: no top-level function {function!r} to copy")
    keep: set[int] = set()
    todo = [function]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in defines:
            continue
        seen.add(name)
        for i in defines[name]:
            if i not in keep:
                keep.add(i)
                todo.extend(_used(tree.body[i]) - set(dir(builtins)))
    lines = source.splitlines()
    parts = []
    for i in sorted(keep):
        stmt = tree.body[i]
        start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
        parts.append("\n".join(lines[start - 1:stmt.end_lineno]))
    return "\n\n".join(parts) + "\n"


def _defined(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in stmt.names}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _used(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}


def check_fallback(bound, seed: int = 0) -> float:
    """Run ``reference_mlx`` on MLX (on its CPU device) at ``bound``'s sizes and compare it
    with the numpy reference (or, without one, return without a check: 0.0). Returns the
    largest difference; raises a KirError naming the output that differs."""
    spec = bound.spec
    if spec.reference_mlx is None or spec.reference is None:
        return 0.0
    import mlx.core as mx

    from kir.spec.compare import compare_outputs

    inputs = bound.make_inputs(seed)
    want = bound.reference({k: (v.copy() if isinstance(v, np.ndarray) else v)
                            for k, v in inputs.items()})
    function = reference_function(spec, "reference_mlx")
    args = {k: (mx.array(v) if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    with mx.stream(mx.cpu):
        try:
            result = function(args, dict(bound.sizes))
        except Exception as exc:  # noqa: BLE001 - the user's code: report it
            raise KirError(f"{spec.path.name}: reference_mlx {spec.reference_mlx} raised "
                           f"{type(exc).__name__}: {exc}") from exc
        got = {name: np.array(mx.array(result[name]).astype(mx.float32)) for name in
               bound.outputs if name in result}
    missing = [name for name in bound.outputs if name not in got]
    if missing:
        raise KirError(f"{spec.path.name}: reference_mlx {spec.reference_mlx} did not return "
                       f"output {missing[0]!r}")
    outcome = compare_outputs(got, want,
                              lambda out: bound.tolerance(spec.args[out].dtype))
    if not outcome.ok:
        raise KirError(f"{spec.path.name}: reference_mlx {spec.reference_mlx} disagrees with "
                       f"reference {spec.reference}: {outcome.describe()}",
                       hint="the generated module would fall back on it: fix one of them")
    return outcome.max_abs_err
