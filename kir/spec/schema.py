"""The kernel spec: ``X.kir.toml`` beside ``X.cu`` says what the CUDA source alone does not.

A spec names the sizes (with defaults and ``ragged`` overrides), each kernel argument's dtype,
shape, role and initial value, scalar arguments as size expressions, the launch, tolerances
and optionally a numpy reference. :func:`load_spec` reads and checks one; :meth:`Spec.bind`
fixes the sizes and gives a :class:`BoundSpec` that evaluates everything to numbers, makes
inputs and calls the reference. Every problem in a spec is a :class:`KirError` naming the spec
file (and the line of the offending key where it can be found).
"""

from __future__ import annotations

import difflib
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kir.errors import KirError, Loc, source_line_of
from kir.ir.types import SCALARS, ScalarType
from kir.spec.sizeexpr import size_names

if TYPE_CHECKING:
    from kir.spec.bound import BoundSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

# scratch: a workspace the kernel writes and reads itself (block partials, a counter of the
# blocks done): zero-filled (or its numeric init) before each launch, never compared with the
# reference nor returned.
ROLES = ("in", "out", "inout", "scratch")
MAX_SPEC_BYTES = 1024 * 1024
TOP_KEYS = ("kernel", "sizes", "ragged", "check", "templates", "launch", "tolerance",
            "reference", "reference_mlx", "require", "args", "include")
LAUNCH_KEYS = ("grid", "block", "shared_bytes")
ARG_KEYS = ("dtype", "shape", "role", "init", "value", "range", "offset", "null")
# Names users reach for out of habit, mapped to kir's dtype names (used for "did you mean").
_DTYPE_ALIASES = {
    "float": "f32", "float32": "f32", "half": "f16", "float16": "f16", "double": "f64",
    "float64": "f64", "int": "i32", "int32": "i32", "unsigned": "u32", "uint": "u32",
    "uint32": "u32", "int64": "i64", "long": "i64", "uint64": "u64", "bfloat16": "bf16",
    "__half": "f16", "__nv_bfloat16": "bf16", "int8": "i8", "uint8": "u8", "char": "i8",
    "uchar": "u8", "unsigned char": "u8", "int16": "i16", "uint16": "u16", "short": "i16",
    "ushort": "u16", "unsigned short": "u16",
}


@dataclass(frozen=True)
class ArgSpec:
    """One kernel argument: a buffer (``shape`` non-empty) or a scalar (``value`` given).

    ``init`` is a float (``0.0``, ``-inf``), ``"input"`` (random like an input), or
    ``"none"`` for an output the kernel writes in full (no fill on the GPU; validation starts it
    as NaN, so an element the kernel forgets shows up); ``None`` for inputs. ``dtype`` of a
    scalar may be ``None``: the kernel's parameter type decides. ``range`` bounds random
    inputs: numbers or size expressions (``[0, "V - 1"]``), evaluated when sizes are bound.
    ``offset`` (a size expression, in elements) is where the kernel's pointer starts in the
    buffer, as in a launch ``k<<<...>>>(data + off, ...)``: the buffer holds ``shape`` elements
    and the kernel sees them from ``offset`` on. ``null`` marks a pointer argument passed as
    ``nullptr``: it has no data, and the kernel's tests of it fold.
    """

    name: str
    dtype: str | None
    shape: tuple[str, ...] = ()
    role: str = "in"
    init: float | str | None = None
    value: str | None = None
    range: tuple[float | str, float | str] = (-1.0, 1.0)
    offset: str | None = None
    null: bool = False

    @property
    def is_buffer(self) -> bool:
        return self.value is None and not self.null

    @property
    def is_scalar(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class Spec:
    """A loaded, checked kernel spec (sizes not yet fixed: see :meth:`bind`)."""

    path: Path
    kernel: str | None
    sizes: dict[str, int]
    ragged: dict[str, int]
    templates: dict[str, str]
    grid: tuple[str, str, str]
    block: tuple[str, str, str]
    shared_bytes: str
    rtol: float | None
    atol: float | None
    reference: str | None
    args: dict[str, ArgSpec]
    text: str = field(default="", repr=False, compare=False)
    # Size overrides at which a search validates candidates on the interpreter when the
    # compiled sizes are too big for it (the GPU still checks at the compiled sizes).
    check: dict[str, int] = field(default_factory=dict)
    # Constraints every size set must meet ("M % BM == 0"; see kir.spec.require).
    require: tuple[str, ...] = ()
    # An MLX version of the reference ("module:function" beside the spec): the generated
    # module's fallback and the baseline a GPU search reports against.
    reference_mlx: str | None = None
    # Folders searched for `#include "..."` headers (after the source's own), relative to the
    # spec's folder.
    include: tuple[str, ...] = ()

    def include_dirs(self) -> list[Path]:
        """The ``include`` folders as paths (relative ones from the spec's folder)."""
        return [self.path.parent / d for d in self.include]

    def bind(self, overrides: dict[str, int] | None = None,
             option: str = "--size") -> "BoundSpec":
        """Fix the sizes: the defaults with ``overrides`` (e.g. ``--size N=4096``; errors
        name ``option``, the command-line option they came from) applied."""
        from kir.spec.bound import BoundSpec

        sizes = dict(self.sizes)
        for name, value in (overrides or {}).items():
            if name not in self.sizes:
                raise KirError(
                    f"{option} {name}={value}: {self.path.name} has no size {name!r} "
                    f"(sizes: {', '.join(self.sizes) or 'none'})",
                    hint=_did_you_mean(name, self.sizes))
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise KirError(f"{option} {name}={value}: sizes must be positive integers "
                               f"(spec {self.path.name})")
            sizes[name] = int(value)
        self.check_require(sizes, "--size " + " ".join(
            f"{k}={v}" for k, v in (overrides or {}).items()) if overrides else "sizes")
        return BoundSpec(self, sizes)

    def broken_requirements(self, sizes: dict[str, int]) -> list[str]:
        """The ``require`` constraints ``sizes`` break (empty when all hold)."""
        from kir.spec.require import broken

        try:
            return broken(self.require, sizes)
        except KirError as exc:
            raise self.error(exc.message, "require", hint=exc.hint) from None

    def check_require(self, sizes: dict[str, int], what: str) -> None:
        """Raise a KirError at ``require`` when ``sizes`` (named ``what``) break a constraint."""
        failed = self.broken_requirements(sizes)
        if failed:
            label = ", ".join(f"{k}={v}" for k, v in sizes.items())
            raise self.error(f"{what}: {label} breaks the spec's constraint {failed[0]!r}",
                             "require", hint="choose sizes that meet every constraint in "
                                             "require, or relax it if the kernel allows")

    def loc(self, *keys: str) -> Loc:
        """Where the key path (``"args", "q", "shape"``) is written in the spec file; the
        nearest enclosing key found, or line 1 when none is."""
        return _locate(self.text, str(self.path), keys)

    def error(self, message: str, *keys: str, hint: str | None = None) -> KirError:
        """A KirError pointing at ``keys`` in this spec, its message naming the spec file."""
        return _error(self.text, self.path, message, keys, hint)


def names_file_item(value: str) -> bool:
    """Whether a value of a spec's ``templates`` table names something of the kernel's file,
    not a size expression: a function (``{ function = "f" }``, held as ``&f``) or a type
    (``{ type = "T" }``, held as ``%T``; :meth:`_Checker.named_template`)."""
    return value.startswith(("&", "%"))


def find_spec(source_path: str | Path) -> Path | None:
    """The spec beside a CUDA source (``softmax.cu`` → ``softmax.kir.toml``), if it exists."""
    source = Path(source_path)
    candidate = source.with_name(source.stem + ".kir.toml")
    return candidate if candidate.is_file() else None


def load_spec(path: str | Path) -> Spec:
    """Read and check a ``.kir.toml`` spec; KirError (file:line:col where known) on bad input."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise KirError(f"spec {path} is a folder, not a .kir.toml file") from None
    except OSError as exc:
        raise KirError(f"cannot read spec {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_SPEC_BYTES:
        raise KirError(f"spec of {len(raw)} bytes: at most {MAX_SPEC_BYTES} are read",
                       Loc(str(path), 1, 1))
    try:
        text = raw.decode("utf-8-sig")  # a byte order mark some editors write is fine
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise KirError(f"{path.name} is not UTF-8 text (byte 0x{raw[exc.start]:02x})",
                       Loc(str(path), line, col),
                       hint="a spec is TOML text; save it as UTF-8") from None
    return load_spec_text(text, path)


def load_spec_text(text: str, path: str | Path) -> Spec:
    """Check spec TOML ``text`` as if read from ``path`` (which need not exist): errors name
    it, and a reference module is looked up beside it."""
    path = Path(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(text, path, exc) from None
    return _Checker(text, path).check(data)


def _toml_error(text: str, path: Path, exc: Exception) -> KirError:
    message = str(exc)
    found = re.search(r"\(at line (\d+), column (\d+)\)", message)
    if found is None:
        found = re.search(r"\(at end of document\)", message)
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
    else:
        line, col = int(found.group(1)), int(found.group(2))
    message = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", message)
    return KirError(f"{path.name} is not valid TOML: {message}", Loc(str(path), line, col),
                    source_line=source_line_of(text, line),
                    hint="see https://toml.io; strings need quotes, tables use { a = 1, b = 2 }")


def _is_struct_table(value: Any) -> bool:
    """An ``[args]`` entry giving a struct parameter's fields (``p.theta = { ... }``): a
    table of tables, none of whose keys is an argument's key."""
    return (isinstance(value, dict) and bool(value) and not set(value) & set(ARG_KEYS)
            and all(isinstance(v, dict) for v in value.values()))


def _did_you_mean(word: str, choices: Any) -> str | None:
    same_but_case = [c for c in choices if c.lower() == word.lower()]
    if same_but_case:
        return f"did you mean {same_but_case[0]!r}? (names are case-sensitive)"
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def _locate(text: str, file: str, keys: tuple[str, ...]) -> Loc:
    """Find ``keys`` (outermost first) in the TOML text, each searched after the previous.

    A heuristic, not a TOML parser: good enough to put the caret on the key a user wrote,
    either as ``key = ...``, a dotted ``key.sub = ...`` or a ``[key]`` table header."""
    pos, best = 0, None
    for key in keys:
        escaped = re.escape(key)
        pattern = re.compile(
            rf"""(?:(?<=[\s{{,.])|^)["']?{escaped}["']?\s*(?==|\.)|^\s*\[+\s*{escaped}\s*\]""",
            re.MULTILINE)
        found = pattern.search(text, pos)
        if found is None:
            break
        start = found.start()
        if text[start:found.end()].lstrip().startswith("["):
            start = text.index("[", start)
        best, pos = start, found.end()
    if best is None:
        return Loc(file, 1, 1)  # callers show no source line for an unfound key
    line = text.count("\n", 0, best) + 1
    col = best - (text.rfind("\n", 0, best) + 1) + 1
    return Loc(file, line, col)


def _error(text: str, path: Path, message: str, keys: tuple[str, ...],
           hint: str | None = None) -> KirError:
    loc = _locate(text, str(path), keys)
    # The loc names the spec file; without a key to point at there is no line worth showing.
    shown = source_line_of(text, loc.line) if keys and _found(text, keys[0]) else None
    return KirError(message, loc, source_line=shown, hint=hint)


def _found(text: str, key: str) -> bool:
    return re.search(rf"(?:^|[\s{{,.\[])[\"']?{re.escape(key)}[\"']?\s*[=.\]]", text,
                     re.MULTILINE) is not None


class _Checker:
    """Turns the TOML data into a Spec, raising on the first problem found."""

    def __init__(self, text: str, path: Path) -> None:
        self.text = text
        self.path = path

    def fail(self, message: str, *keys: str, hint: str | None = None) -> KirError:
        return _error(self.text, self.path, message, keys, hint)

    def check(self, data: dict[str, Any]) -> Spec:
        for key in data:
            if key not in TOP_KEYS:
                raise self.fail(f"unknown key {key!r}", key,
                                hint=_did_you_mean(key, TOP_KEYS)
                                or f"known keys: {', '.join(TOP_KEYS)}")
        kernel = data.get("kernel")
        if kernel is not None and not isinstance(kernel, str):
            raise self.fail("kernel must be a string naming a __global__ function", "kernel")
        sizes = self.sizes(data.get("sizes", {}), "sizes")
        ragged = self.sizes(data.get("ragged", {}), "ragged")
        for name in ragged:
            if name not in sizes:
                raise self.fail(f"ragged overrides unknown size {name!r}", "ragged", name,
                                hint=_did_you_mean(name, sizes)
                                or f"sizes: {', '.join(sizes) or 'none'}")
        check = self.sizes(data.get("check", {}), "check")
        for name in check:
            if name not in sizes:
                raise self.fail(f"check overrides unknown size {name!r}", "check", name,
                                hint=_did_you_mean(name, sizes)
                                or f"sizes: {', '.join(sizes) or 'none'}")
        templates = dict(self.table(data.get("templates", {}), "templates"))
        for name, expr in templates.items():
            if isinstance(expr, dict):  # a function (template <..., T (*ACT_FN)(const T&)>)
                templates[name] = self.named_template(expr, name)  # or a file's type
            elif isinstance(expr, bool) or expr in ("true", "false"):  # template <bool B>
                templates[name] = "1" if expr in (True, "true") else "0"
            elif isinstance(expr, str) and re.fullmatch(r"[A-Za-z_]\w*", expr) \
                    and expr not in sizes and expr not in SCALARS:
                raise self.fail(f"templates.{name} = {expr!r} is neither a size nor a dtype",
                                "templates", name, hint=_did_you_mean(expr, sizes) or
                                f'declare it in sizes, or for one of the file\'s types (a '
                                f'function object) write {name} = {{ type = "{expr}" }}')
            elif not (isinstance(expr, str) and expr in SCALARS):  # a dtype: `typename T`
                self.expr(expr, sizes, "templates", name)
        include = data.get("include", [])
        if not isinstance(include, list) or not all(isinstance(d, str) for d in include):
            raise self.fail("include must be a list of folders (strings)", "include",
                            hint='e.g. include = ["../common"] (relative to the spec)')
        grid, block, shared = self.launch(data, sizes)
        rtol, atol = self.tolerance(data.get("tolerance"))
        reference = self.reference(data, "reference", "softmax")
        reference_mlx = self.reference(data, "reference_mlx", "softmax_mlx")
        args = self.args(self.table(data.get("args", {}), "args"), sizes)
        require = self.require(data.get("require", []), sizes)
        spec = Spec(self.path, kernel, sizes, ragged,
                    {k: str(v) for k, v in templates.items()}, grid, block, shared,
                    rtol, atol, reference, args, self.text, check, require, reference_mlx,
                    tuple(include))
        for table, overrides in (("sizes", {}), ("ragged", ragged), ("check", check)):
            merged = {**sizes, **overrides}
            failed = spec.broken_requirements(merged)
            if failed:
                label = ", ".join(f"{k}={v}" for k, v in merged.items())
                raise self.fail(f"{table} break the constraint {failed[0]!r} of require "
                                f"({label})", table if overrides or table == "sizes"
                                else "require",
                                hint="every size set kir runs must meet require: change the "
                                     f"{table} or the constraint")
        return spec

    def reference(self, data: dict[str, Any], key: str, example: str) -> str | None:
        reference = data.get(key)
        if reference is not None and (not isinstance(reference, str)
                                      or reference.count(":") != 1
                                      or not all(reference.split(":"))):
            raise self.fail(f"{key} must be \"module:function\", got {reference!r}",
                            key, hint=f'e.g. {key} = "refs:{example}" (refs.py beside '
                                      'the spec)')
        return reference

    def require(self, value: Any, sizes: dict[str, int]) -> tuple[str, ...]:
        """``require``: a list of constraints over the sizes (kir.spec.require)."""
        from kir.spec.require import constraint_names

        items = value if isinstance(value, list) else [value]
        out = []
        for item in items:
            try:
                names = constraint_names(item)
            except KirError as exc:
                raise self.fail(exc.message, "require", hint=exc.hint or
                                'write constraints such as "M % BM == 0" or "N >= 64"') \
                    from None
            for name in sorted(names):
                if name not in sizes:
                    raise self.fail(f"require {item!r} refers to unknown size {name!r}",
                                    "require", hint=_did_you_mean(name, sizes)
                                    or f"sizes: {', '.join(sizes) or 'none'}")
            out.append(item.strip())
        return tuple(out)

    def table(self, value: Any, *keys: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"{'.'.join(keys)} must be a table ({{ a = 1 }})", *keys)
        return value

    def sizes(self, value: Any, key: str) -> dict[str, int]:
        out = {}
        for name, size in self.table(value, key).items():
            if isinstance(size, bool) or not isinstance(size, int):
                raise self.fail(f"{key}.{name} must be an integer, got {size!r}", key, name)
            if size <= 0:
                raise self.fail(f"{key}.{name} = {size}: sizes must be positive", key, name)
            out[name] = size
        return out

    def named_template(self, value: dict, name: str) -> str:
        """``{ function = "silu_kernel" }``: the function's name, held as ``&name``;
        ``{ type = "Neg" }``: one of the file's types (a function object for ``typename
        Op``), held as ``%Neg``."""
        (kind, named), = value.items() if len(value) == 1 else ((None, None),)
        if kind not in ("function", "type") or not isinstance(named, str) \
                or not re.fullmatch(r"[A-Za-z_]\w*(::[A-Za-z_]\w*)*", named):
            raise self.fail("a template argument naming something of the file is "
                            "{ function = \"NAME\" } or { type = \"NAME\" }",
                            "templates", name, hint='e.g. ACT_FN = { function = "silu_kernel" '
                                                    '}, Op = { type = "Neg" }')
        return ("&" if kind == "function" else "%") + named

    def expr(self, expr: Any, sizes: dict[str, int], *keys: str) -> str:
        """Check a size expression refers only to known sizes; return its text."""
        if isinstance(expr, bool) or not isinstance(expr, (str, int, float)):
            raise self.fail(f"{'.'.join(keys)} must be a size expression (string or number), "
                            f"got {expr!r}", *keys)
        try:
            names = size_names(str(expr))
        except KirError as exc:
            raise self.fail(exc.message, *keys, hint=exc.hint) from None
        for name in sorted(names):
            if name not in sizes:
                raise self.fail(f"{'.'.join(keys)} refers to unknown size {name!r}", *keys,
                                hint=_did_you_mean(name, sizes)
                                or f"declare it in sizes = {{ {name} = ... }}")
        return str(expr)

    def dims(self, value: Any, sizes: dict[str, int], *keys: str) -> tuple[str, str, str]:
        items = value if isinstance(value, list) else [value]
        if not 1 <= len(items) <= 3:
            raise self.fail(f"{'.'.join(keys)} needs 1 to 3 dimensions, got {len(items)}", *keys)
        exprs = [self.expr(item, sizes, *keys) for item in items]
        return tuple(exprs + ["1"] * (3 - len(exprs)))  # type: ignore[return-value]

    def launch(self, data: dict[str, Any], sizes: dict[str, int]) -> tuple[Any, Any, str]:
        if "launch" not in data:
            raise self.fail("missing launch", hint='add launch = { grid = ["..."], block = '
                                                   '["..."] } (grid counted in blocks)')
        launch = self.table(data["launch"], "launch")
        for key in launch:
            if key not in LAUNCH_KEYS:
                raise self.fail(f"unknown launch key {key!r}", "launch", key,
                                hint=_did_you_mean(key, LAUNCH_KEYS)
                                or f"known: {', '.join(LAUNCH_KEYS)}")
        for key in ("grid", "block"):
            if key not in launch:
                raise self.fail(f"launch has no {key}", "launch",
                                hint=f'add {key} = ["..."] to launch')
        grid = self.dims(launch["grid"], sizes, "launch", "grid")
        block = self.dims(launch["block"], sizes, "launch", "block")
        shared = self.expr(launch.get("shared_bytes", 0), sizes, "launch", "shared_bytes")
        return grid, block, shared

    def tolerance(self, value: Any) -> tuple[float | None, float | None]:
        if value is None:
            return None, None
        table = self.table(value, "tolerance")
        for key, number in table.items():
            if key not in ("rtol", "atol"):
                raise self.fail(f"unknown tolerance key {key!r}", "tolerance", key,
                                hint=_did_you_mean(key, ("rtol", "atol")) or "use rtol, atol")
            if isinstance(number, bool) or not isinstance(number, (int, float)) or number < 0 \
                    or math.isnan(number):
                raise self.fail(f"tolerance.{key} must be a non-negative number", "tolerance",
                                key)
        rtol, atol = table.get("rtol"), table.get("atol")
        return (None if rtol is None else float(rtol)), (None if atol is None else float(atol))

    def args(self, table: dict[str, Any], sizes: dict[str, int]) -> dict[str, ArgSpec]:
        """``[args]``, a struct parameter's fields flattened: ``p.head_dim = { ... }`` (a
        table of tables, none of whose keys is an argument key) is the argument
        ``p_head_dim``, the kernel parameter the frontend makes of the field."""
        out: dict[str, ArgSpec] = {}

        def add(name: str, value: Any, where: tuple[str, ...]) -> None:
            if _is_struct_table(value):
                for member, sub in value.items():
                    add(f"{name}_{member}", sub, where + (member,))
                return
            if name in out:
                raise self.fail(f"argument {name!r} given twice (once as a struct field "
                                f"{'.'.join(where[1:])})", *where)
            out[name] = self.arg(name, value, sizes, where)

        for name, value in table.items():
            add(name, value, ("args", name))
        return out

    def arg(self, name: str, value: Any, sizes: dict[str, int],
            where: tuple[str, ...] | None = None) -> ArgSpec:
        where = where or ("args", name)
        table = self.table(value, *where)
        for key in table:
            if key not in ARG_KEYS:
                raise self.fail(f"argument {name!r}: unknown key {key!r}", *where, key,
                                hint=_did_you_mean(key, ARG_KEYS)
                                or f"known: {', '.join(ARG_KEYS)}")
        dtype = table.get("dtype")
        if dtype is not None and (not isinstance(dtype, str) or dtype not in SCALARS):
            alias = _DTYPE_ALIASES.get(str(dtype))
            raise self.fail(f"argument {name!r}: unknown dtype {dtype!r}", *where, "dtype",
                            hint=(f"did you mean {alias!r}?" if alias else None)
                            or f"kir dtypes: {', '.join(SCALARS)}")
        role = table.get("role", "in")
        if role not in ROLES:
            raise self.fail(f"argument {name!r}: role must be in, out, inout or scratch, got "
                            f"{role!r}",
                            *where, "role", hint=_did_you_mean(str(role), ROLES))
        if "null" in table:
            return self.null_arg(name, table)
        init = self.init(name, table.get("init"), role)
        bounds = self.range(name, table.get("range", [-1.0, 1.0]), sizes,
                            dtype if "range" in table else None)
        if "value" in table:
            if "shape" in table:
                raise self.fail(f"argument {name!r} has both shape and value: a buffer has a "
                                "shape, a scalar a value", *where)
            if role != "in" or "init" in table:
                raise self.fail(f"scalar argument {name!r} cannot have a role or init "
                                "(kernels cannot return scalars)", *where)
            if "offset" in table:
                raise self.fail(f"scalar argument {name!r} cannot have an offset (only a "
                                "pointer can start inside a buffer)", *where, "offset")
            expr = self.expr(table["value"], sizes, *where, "value")
            return ArgSpec(name, dtype, (), "in", None, expr, bounds)
        if "shape" not in table:
            if role != "in" or "init" in table or "range" in table:
                raise self.fail(f"buffer argument {name!r} has no shape", *where,
                                hint=f'add shape = ["N", ...] to args.{name}')
            if dtype is not None:
                raise self.fail(f"argument {name!r} has neither shape nor value", *where,
                                hint='a buffer needs shape = ["N", ...]; a scalar needs '
                                     'value = "N" (a size expression)')
            raise self.fail(f"scalar argument {name!r} has no value", *where,
                            hint='add value = "..." (a size expression such as "N" or '
                                 '"1 / sqrt(D)")')
        if dtype is None:
            raise self.fail(f"buffer argument {name!r} has no dtype", *where,
                            hint='add dtype = "f32" (or f16, bf16, f64, i32, u32, ...)')
        shape = table["shape"] if isinstance(table["shape"], list) else [table["shape"]]
        if not shape:
            raise self.fail(f"buffer argument {name!r} has an empty shape", *where, "shape")
        dims = tuple(self.expr(dim, sizes, *where, "shape") for dim in shape)
        if init is None and role != "in":
            init = "input" if role == "inout" else 0.0
        if role == "scratch" and not isinstance(init, float):
            raise self.fail(f"argument {name!r}: a scratch buffer starts at a number (init = 0, "
                            f"the default), not {init!r}", *where, "init")
        if isinstance(init, float):
            self.init_fits(name, init, dtype)
        offset = None
        if "offset" in table:
            offset = self.expr(table["offset"], sizes, *where, "offset")
        return ArgSpec(name, dtype, dims, role, init, None, bounds, offset)

    def null_arg(self, name: str, table: dict[str, Any]) -> ArgSpec:
        """``bias = { null = true }``: a pointer argument passed as ``nullptr``."""
        if table["null"] is not True:
            raise self.fail(f"argument {name!r}: null must be true (leave it out for a "
                            "buffer)", "args", name, "null")
        extra = [k for k in table if k not in ("null", "dtype")]
        if extra:
            raise self.fail(f"argument {name!r} is null, so it cannot have {extra[0]!r} (a null "
                            "pointer has no data)", "args", name, extra[0])
        return ArgSpec(name, table.get("dtype"), null=True)

    def init(self, name: str, init: Any, role: str) -> float | str | None:
        if init is None:
            return None
        if isinstance(init, bool):
            init = None
        elif isinstance(init, (int, float)):
            return float(init)
        elif isinstance(init, str):
            if init in ("input", "none"):
                if init == "none" and role != "out":
                    raise self.fail(f"argument {name!r}: init = 'none' is for role 'out' (the "
                                    "kernel writes every element)", "args", name, "init")
                return init
            try:
                number = float(init)
            except ValueError:
                number = None
            if number is not None and not math.isnan(number):
                return number
        raise self.fail(f"argument {name!r}: init must be a number, '-inf', 'inf', 'input' "
                        "or 'none'",
                        "args", name, "init")

    def init_fits(self, name: str, init: float, dtype: str) -> None:
        """A numeric init must be a value of the buffer's dtype (an integer buffer cannot
        start at -inf or 1e10; a float one at a finite value past its largest)."""
        kind = SCALARS.get(dtype)
        if kind is None or kind.name == "bool":
            return
        if kind.is_float:
            largest = float(np.finfo(np.float32 if kind.name == "bf16" else kind.numpy).max)
            ok = not math.isfinite(init) or abs(init) <= largest
        else:
            info = np.iinfo(kind.numpy)
            ok = math.isfinite(init) and init.is_integer() \
                and float(info.min) <= init <= float(info.max)
        if not ok:
            raise self.fail(f"argument {name!r}: init {init:g} is not a {dtype} value", "args",
                            name, "init", hint="give an init the buffer's dtype can hold")

    def range(self, name: str, bounds: Any, sizes: dict[str, int], dtype: str | None = None
              ) -> tuple[float | str, float | str]:
        """``[low, high]``: numbers, or size expressions (``[0, "V - 1"]``) checked here and
        evaluated (and compared) when the sizes are bound. Numbers must fit in ``dtype``."""
        where = ("args", name, "range")
        if not isinstance(bounds, list) or len(bounds) != 2:
            raise self.fail(f"argument {name!r}: range must be [low, high] with low <= high",
                            *where)
        out: list[float | str] = []
        for bound in bounds:
            if isinstance(bound, str):
                out.append(self.expr(bound, sizes, *where))
            elif isinstance(bound, (int, float)) and not isinstance(bound, bool) \
                    and math.isfinite(bound):
                out.append(float(bound))
            else:
                raise self.fail(f"argument {name!r}: range bounds are numbers or size "
                                f"expressions, got {bound!r}", *where)
        if all(isinstance(b, float) for b in out) and out[0] > out[1]:
            raise self.fail(f"argument {name!r}: range must be [low, high] with low <= high",
                            *where)
        numbers = [b for b in out if isinstance(b, float)]
        problem = range_misfit(numbers, dtype) if numbers else None
        if problem:  # random inputs outside the dtype would be inf or wrap: not what was asked
            raise self.fail(f"argument {name!r}: range {bounds} {problem}", *where)
        return out[0], out[1]


def range_misfit(values: list[float], dtype: str | None) -> str | None:
    """Why random inputs between ``values`` cannot be of ``dtype`` (past a float's largest
    value, or an integer's range; unsigned types clamp below at 0), or None."""
    if dtype not in SCALARS or SCALARS[dtype].name == "bool":
        return None
    kind = SCALARS[dtype]
    info = np.finfo(np.float32 if kind.name == "bf16" else kind.numpy) if kind.is_float \
        else np.iinfo(kind.numpy)
    low, high = float(info.min), float(info.max)  # Python floats: no numpy cast
    if not kind.is_float and not kind.is_signed:
        low = -math.inf
    if all(low <= v <= high for v in values):
        return None
    return f"does not fit in {dtype} ([{info.min:.6g}, {info.max:.6g}])"


def dtype_of(name: str | ScalarType) -> ScalarType:
    """The ScalarType for a dtype name (``"f32"``) or ScalarType."""
    return name if isinstance(name, ScalarType) else SCALARS[name]


def spec_from_data(data: dict[str, Any], path: str | Path) -> Spec:
    """A spec from a dict shaped like the TOML (the Python API's ``spec={...}``), checked as
    if it were the file ``path``: it is written as TOML text first, so errors point at a
    line of that text as they would in a file."""
    from kir.spec.toml_text import dumps

    if not isinstance(data, dict):
        raise KirError(f"a spec must be a dict, TOML text or a path, got {type(data).__name__}")
    try:
        text = dumps(data)
    except TypeError as exc:
        raise KirError(f"spec for {Path(path).name}: {exc}",
                       hint="use strings, numbers, booleans, lists and dicts only") from None
    return load_spec_text(text, path)


__all__ = ["ArgSpec", "Spec", "dtype_of", "find_spec", "load_spec", "load_spec_text",
           "spec_from_data"]
