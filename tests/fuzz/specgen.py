"""Spec fuzzing: inputs and the oracle for ``.kir.toml`` specs, bound and evaluated.

Each input is numbered by a seed (:func:`spec_input`): half mutate an example spec (text
mutations and TOML tokens put in place of words), half are written from a small grammar
with hostile size expressions (``10 ** 10 ** 10``, ``ceil(1e400)``, deep parentheses, huge
sizes, unknown names), dtypes, shapes, inits and ranges; some carry a byte order mark or
bytes that are not UTF-8, and some bind ``--size`` overrides.

:func:`spec_outcome` is the oracle: loading, binding and evaluating everything a run
evaluates (launch, shapes, scalars, templates, the memory estimate, and at small sizes the
inputs) must give values or a :class:`KirError` located in the spec file; a spec beside an
example kernel is also loaded with it (errors then in the spec or the kernel). Anything else
raises :class:`~fuzz.cudagen.FuzzFailure`.
"""

from __future__ import annotations

import random
from pathlib import Path

from fuzz.cudagen import EXAMPLES, FuzzFailure, mutate

from kir.errors import KirError

SPECS = sorted(EXAMPLES.glob("*.kir.toml"))
_TOKENS = ["=", "[", "]", "{", "}", ",", '"', "'", "-1", "0", "1e999", "nan", "-inf", "true",
           "[[args]]", "\n", "#", '"N * 0"', '"2**31"', '"x y"', '"ceil("', "shape", "value",
           "role", "init", "dtype", '"f32"', '"i8"', "range", '"10 ** 10 ** 10"',
           '"ceil(1e400)"', '"9" * 999', "\ufeff", "\x00", '"N // 0"', "1e308", "[]", "{}",
           '"(((((((((((((((((((((((((((((((((((((((((((((((((((N)))))))))))))))))))))))))))))'
           ')))))))))))))))))))))"']
_BENIGN = ["N", "N", "4", "ceil(N / 32)", "N // 2", "N * 2", "max(N, 8)", "2 ** 4", "N - 1"]
_EXPRS = ["N", "M", "N * M", "ceil(N / 32)", "N // 4", "N % 7", "2 ** 10", "10 ** 10 ** 10",
          "ceil(1e400)", "1 / 0", "N // 0", "sqrt(-1)", "log2(0)", "inf", "nan", "-N",
          "max(N, 2 ** 300)", "min()", "abs(N - M)", "floor(N / 3.5)", "N ** 0.5",
          "(-8) ** 0.5", "1e308 * 10", "9" * 400, "(" * 150 + "N" + ")" * 150, "N +", "",
          "__import__('os')", "N.bit_length()", "x[0]", "lambda: 1", "N if M else 2",
          "unknown", "N\u00e9", "0x10", "1_000", "True", "N and M", "N < M", "2 ** -3"]
_DTYPES = ["f32", "f16", "bf16", "f64", "i32", "u32", "i64", "u8", "bool", "float", "i8", "",
           "F32", 5]
_INITS = ['0.0', '"input"', '"none"', '"-inf"', '"inf"', '"nan"', '"zero"', "1e999", "true",
          '"5"']


def _expr(rng: random.Random) -> str:
    text = rng.choice(_BENIGN if rng.random() < 0.75 else _EXPRS)
    if rng.random() < 0.3:
        text = f"{text} {rng.choice(['+', '*', '//', '**', '-'])} {rng.choice(_EXPRS)}"
    return text


def _quoted(rng: random.Random, text: str) -> str:
    return rng.choice([f'"{text}"', f"'{text}'", text]) if rng.random() < 0.03 else \
        '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def generate(rng: random.Random) -> str:
    """A spec written from the grammar: mostly well-formed TOML, hostile values."""
    names = ["N"] + rng.sample(["M", "K", "rows", "cols", "B"], rng.randint(0, 2))
    values = ["4", "64", "0", "-3", "2147483648", "1e3", '"x"', str(2**70)]
    sizes = ", ".join(f"{n} = {rng.choice(values) if rng.random() < 0.15 else rng.choice(['4', '64', '256'])}"
                      for n in names)
    lines = [f"sizes = {{ {sizes} }}"]
    if rng.random() < 0.3:
        lines.append(f"ragged = {{ {rng.choice(names + ['Q'] if rng.random() < 0.2 else names)} = 3 }}")
    if rng.random() < 0.2:
        lines.append(f"check = {{ {rng.choice(names + ['Q'] if rng.random() < 0.2 else names)} = 2 }}")
    if rng.random() < 0.2:
        lines.append(f"templates = {{ T = {_quoted(rng, _expr(rng))} }}")
    dims = rng.randint(0, 4) if rng.random() < 0.1 else rng.randint(1, 3)
    grid = ", ".join(_quoted(rng, _expr(rng)) for _ in range(dims))
    block = ", ".join(rng.choice(["32", "128", "1", "0", "2048", '"N"', "-1", "1.5"])
                      if rng.random() < 0.2 else rng.choice(["32", "128", "1"])
                      for _ in range(rng.randint(1, 3)))
    if rng.random() < 0.95:
        shared = f", shared_bytes = {_quoted(rng, _expr(rng))}" if rng.random() < 0.3 else ""
        lines.append(f"launch = {{ grid = [{grid}], block = [{block}]{shared} }}")
    if rng.random() < 0.3:
        lines.append(f"tolerance = {{ rtol = {rng.choice(['1e-4', '-1', 'nan', '1e999'])}, "
                     f"atol = {rng.choice(['0', '1', 'inf'])} }}")
    if rng.random() < 0.2:
        lines.append(f'reference = "{rng.choice(["refs:softmax", "nope:f", "refs", ":"])}"')
    lines.append("[args]")
    for k in range(rng.randint(0, 4)):
        dtype = rng.choice(_DTYPES) if rng.random() < 0.2 else rng.choice(["f32", "i32"])
        fields = [f"dtype = {_quoted(rng, str(dtype))}"] if rng.random() < 0.9 else []
        if rng.random() < 0.6:
            dims = ", ".join(_quoted(rng, _expr(rng)) for _ in range(rng.randint(0, 3)))
            fields.append(f"shape = [{dims}]")
        else:
            fields.append(f"value = {_quoted(rng, _expr(rng))}")
        if rng.random() < 0.4:
            fields.append(f'role = "{rng.choice(["in", "out", "inout", "both"])}"')
        if rng.random() < 0.3:
            fields.append(f"init = {rng.choice(_INITS)}")
        if rng.random() < 0.2:
            fields.append(f"range = [{rng.choice(['-1.0, 1.0', '1, -1', 'nan, 1', '0'])}]")
        name = rng.choice(["x", "y", "n"]) + str(k) if rng.random() < 0.95 else "x0"
        lines.append(f"{name} = {{ {', '.join(fields)} }}")
    return "\n".join(lines) + "\n"


def _mutate_toml(rng: random.Random, text: str) -> str:
    if rng.random() < 0.5:
        return mutate(rng, text)
    lines = text.splitlines() or [""]
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(len(lines))
        words = lines[pos].split(" ")
        words[rng.randrange(len(words))] = rng.choice(_TOKENS)
        lines[pos] = " ".join(words)
    return "\n".join(lines) + "\n"


def spec_input(seed: int) -> tuple[bytes, dict[str, int], str | None]:
    """The spec bytes for ``seed``, the ``--size`` overrides to bind it with, and the example
    kernel (a ``.cu`` name) to load it with, or None."""
    rng = random.Random(seed)
    if rng.random() < 0.5:
        text = _mutate_toml(rng, rng.choice(SPECS).read_text())
    else:
        text = generate(rng)
    data = text.encode("utf-8", errors="replace")
    if rng.random() < 0.05:
        data = b"\xef\xbb\xbf" + data
    if rng.random() < 0.03:
        at = rng.randrange(len(data) + 1)
        data = data[:at] + bytes([rng.randrange(128, 256)]) + data[at:]
    overrides = {}
    if rng.random() < 0.2:
        overrides[rng.choice(["N", "rows", "cols", "H", "Q"])] = rng.choice(
            [1, 3, 0, -1, 2**31, 2**62, 10**30])
    kernel = rng.choice([s.name.replace(".kir.toml", ".cu") for s in SPECS]) \
        if rng.random() < 0.15 else None
    return data, overrides, kernel


SMALL_BYTES = 32 * 1024 * 1024  # inputs made only when a run needs less than this


def spec_outcome(data: bytes, overrides: dict[str, int], kernel: str | None,
                 folder: Path) -> str:
    """"spec" (everything evaluated), "error" (a KirError in the spec, or the kernel);
    raises FuzzFailure for anything else."""
    name = (kernel or "fuzz.cu").replace(".cu", ".kir.toml")
    path = folder / name
    path.write_bytes(data)
    allowed = {str(path)}
    try:
        if kernel is not None:
            import shutil

            shutil.copy(EXAMPLES / kernel, folder / kernel)
            allowed.add(str(folder / kernel))
            from kir.driver.load import load_kernel

            load_kernel(folder / kernel, spec_path=path, sizes=overrides)
        _exercise(path, overrides)
    except KirError as exc:
        if exc.loc is None or exc.loc.file not in allowed:
            if not (overrides and str(exc).startswith("error: --size")):  # names the option
                raise FuzzFailure(f"error without a location in the spec: {exc}",
                                  data.decode("utf-8", "replace")) from exc
        return "error"
    except Exception as exc:  # noqa: BLE001 - what the fuzzer hunts
        raise FuzzFailure(f"{type(exc).__name__}: {exc}",
                          data.decode("utf-8", "replace")) from exc
    return "spec"


def _exercise(path: Path, overrides: dict[str, int]) -> None:
    from kir.spec import load_spec

    spec = load_spec(path)
    bound = spec.bind(overrides)
    _ = bound.grid, bound.block, bound.shared_bytes, bound.launch()
    for name, arg in spec.args.items():
        bound.scalar(name) if arg.is_scalar else bound.shape(name)
    bound.template_values()
    for dtype in {a.dtype for a in spec.args.values() if a.dtype}:
        bound.tolerance(dtype)
    bound.check_memory()
    if bound.memory_needed() < SMALL_BYTES:
        bound.make_inputs(0)
