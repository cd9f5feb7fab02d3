"""Inputs for the frontend fuzzers, and the oracle every input must satisfy.

Two sources of inputs, both driven by a seeded :class:`random.Random` so a failure replays from
its seed alone (the hypothesis tests draw the seed; ``benchmarks/fuzz_frontend.py`` counts
through seeds):

* :func:`mutate` takes a real kernel (``examples/*.cu``) and applies a few text mutations:
  delete, duplicate or swap spans, insert CUDA tokens or junk bytes, replace identifiers and
  numbers, truncate, nest deeply. Mostly the result is *almost* valid, which reaches far
  deeper into the parser and lowering than random text does.
* :func:`generate` writes a CUDA-ish kernel from a small grammar: declarations, loops, ifs,
  shared arrays, barriers, shuffles, atomics, casts, constructs outside kir's subset, and
  long or deeply nested expressions.

:func:`frontend_outcome` is the oracle: ``load_cuda`` must return a kernel or raise a
:class:`KirError` whose ``loc`` names the input file with a line and column inside it; a
kernel must then print and parse back to itself. Anything else raises :class:`FuzzFailure`.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from kir.errors import KirError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FILENAME = "fuzz.cu"
# Values for the examples' integer template parameters (unused names are ignored), so mutants
# of templated kernels reach the lowering instead of stopping at "missing value".
TEMPLATE_VALUES = {"TILE": 16, "T": 32, "BLOCK": 256, "N": 64}

_TOKENS = (
    "__global__", "__device__", "__shared__", "__syncthreads();", "__syncwarp();", "void",
    "float", "int", "unsigned", "half", "double", "bool", "const", "__restrict__", "extern",
    "template<int T>", "typedef", "struct", "if", "else", "for", "while", "do", "return",
    "break;", "continue;", "switch", "goto", "sizeof", "threadIdx.x", "blockIdx.y",
    "blockDim.x", "gridDim.z", "warpSize", "__shfl_xor_sync(0xffffffff, v, 16)",
    "atomicAdd(&y[0], 1.0f)", "expf", "__expf", "fmaxf", "rsqrtf", "(float)", "(int)",
    "static_cast<float>", "#pragma unroll", "#define X 4\n", "#if 0\n", "#endif\n",
    "#include <x.h>\n", "{", "}", "(", ")", "[", "]", ";", ",", "=", "+=", "<<=", "?", ":",
    "->", ".", "*", "&", "&&", "||", "!", "~", "^", "%", "/", "<<", ">>", "++", "--",
    "0", "1", "-1", "0x7fffffff", "4294967296", "1e39f", "1.5e-45f", "0.5f", "'a'", '"s"',
    "\\\n", "/*", "*/", "//", "\n", "\t", " ", "\x00", "\u00e9", "\r\n",
)
_IDENT = re.compile(r"[A-Za-z_]\w*")
_NUMBER = re.compile(r"\b\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[fFuUlL]*\b")


class FuzzFailure(AssertionError):
    """An input broke the oracle: the message holds the cause, the input is attached."""

    def __init__(self, message: str, text: str) -> None:
        super().__init__(message)
        self.text = text


def examples() -> list[tuple[str, str]]:
    """(file name, text) of every example kernel, the mutation seeds."""
    return [(p.name, p.read_text()) for p in sorted(EXAMPLES.glob("*.cu"))]


# -- mutation -------------------------------------------------------------------------------

def _span(rng: random.Random, text: str, longest: int = 40) -> tuple[int, int]:
    start = rng.randrange(len(text) + 1)
    return start, min(len(text), start + rng.randrange(longest + 1))


def _mutate_once(rng: random.Random, text: str) -> str:
    kind = rng.randrange(11)
    start, end = _span(rng, text)
    if kind == 0:  # delete a span
        return text[:start] + text[end:]
    if kind == 1:  # insert a CUDA token
        return text[:start] + rng.choice(_TOKENS) + text[start:]
    if kind == 2:  # duplicate a span
        return text[:end] + text[start:end] + text[end:]
    if kind == 3:  # replace one character with a random printable (or odd) one
        if not text:
            return text
        pos = rng.randrange(len(text))
        char = chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 32), 0xFFFD, 0x2028]))
        return text[:pos] + char + text[pos + 1:]
    if kind == 4:  # replace an identifier with another from the text or a keyword
        found = list(_IDENT.finditer(text))
        if not found:
            return text
        victim = rng.choice(found)
        other = rng.choice(found).group() if rng.random() < 0.7 else rng.choice(_TOKENS)
        return text[:victim.start()] + other + text[victim.end():]
    if kind == 5:  # replace a number with an edge value
        found = list(_NUMBER.finditer(text))
        if not found:
            return text
        victim = rng.choice(found)
        other = rng.choice(["0", "-1", "1", "31", "32", "33", "1024", "2147483647",
                            "2147483648", "0xffffffffu", "99999999999999999999", "1e308",
                            "0.0f", "3.5"])
        return text[:victim.start()] + other + text[victim.end():]
    if kind == 6:  # truncate
        return text[:start]
    if kind == 7:  # swap two spans
        other_start, other_end = _span(rng, text)
        if other_start < start:
            (start, end), (other_start, other_end) = (other_start, other_end), (start, end)
        if other_start < end:
            return text
        return (text[:start] + text[other_start:other_end] + text[end:other_start]
                + text[start:end] + text[other_end:])
    if kind == 8:  # wrap a span in deep parentheses or braces
        depth = rng.choice([2, 10, 100, 1000])
        open_, close = ("(", ")") if rng.random() < 0.5 else ("{", "}")
        return text[:start] + open_ * depth + text[start:end] + close * depth + text[end:]
    if kind == 9:  # remove all of one kind of bracket or separator
        char = rng.choice("{}();,[]")
        return text.replace(char, "", rng.choice([1, 2, -1]))
    # junk bytes, decoded as the loader does (errors="replace")
    junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
    return text[:start] + junk.decode("utf-8", errors="replace") + text[start:]


def mutate(rng: random.Random, text: str, count: int | None = None) -> str:
    """``text`` after ``count`` (default 1 to 4) random mutations."""
    for _ in range(count if count is not None else rng.randint(1, 4)):
        text = _mutate_once(rng, text)
    return text


# -- generation -----------------------------------------------------------------------------

_BINARY = ("+", "-", "*", "/", "%", "<", "<=", "==", "!=", "&&", "||", "&", "|", "^", "<<",
           ">>", ">", ">=")
_CALLS = ("expf", "__expf", "sqrtf", "fmaxf", "fminf", "rsqrtf", "fabsf", "min", "max",
          "__shfl_xor_sync", "__shfl_down_sync", "unknown_fn", "printf", "__ldg")
_TYPES = ("float", "int", "unsigned", "unsigned int", "double", "half", "bool", "long",
          "size_t", "float4", "int64_t", "char", "auto", "const float")


class _Gen:
    """Writes one random CUDA-ish kernel; ``vars`` are names in scope (maybe undeclared)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.vars = ["x", "y", "n", "tid", "i"]
        self.lines: list[str] = []

    def expr(self, depth: int) -> str:
        r = self.rng
        choice = r.randrange(12 if depth > 0 else 5)
        if choice == 0:
            return r.choice(self.vars)
        if choice == 1:
            return r.choice(["0", "1", "2", "32", "-1", "0.5f", "1e30f", "3", "255u",
                             "0x10", "1.0", "2147483647", "-2147483648"])
        if choice == 2:
            return r.choice(["threadIdx.x", "blockIdx.x", "blockDim.x", "gridDim.y",
                             "threadIdx.y", "warpSize"])
        if choice == 3:
            return f"x[{r.choice(self.vars)}]"
        if choice == 4:
            return f"s[{r.choice(['tid', 'i', '0', 'tid % 32'])}]"
        if choice == 5:  # a long flat chain: stresses anything recursive on expression depth
            ops = [r.choice(_BINARY) for _ in range(r.choice([3, 30, 3000]))]
            return " ".join(f"{r.choice(self.vars)} {op}" for op in ops) + " 1"
        if choice == 6:
            return f"({self.expr(depth - 1)} {r.choice(_BINARY)} {self.expr(depth - 1)})"
        if choice == 7:
            return f"{r.choice(['-', '!', '~', '+'])}{self.expr(depth - 1)}"
        if choice == 8:
            name = r.choice(_CALLS)
            args = ", ".join(self.expr(depth - 1) for _ in range(r.choice([1, 2, 3])))
            return f"{name}({args})"
        if choice == 9:
            return f"(({r.choice(_TYPES)}){self.expr(depth - 1)})"
        if choice == 10:
            return f"({self.expr(depth - 1)} ? {self.expr(depth - 1)} : {self.expr(depth - 1)})"
        return "(" * 200 + self.expr(0) + ")" * 200

    def stmt(self, depth: int, indent: str) -> None:
        r, out = self.rng, self.lines.append
        choice = r.randrange(14 if depth > 0 else 9)
        if choice == 0:
            name = f"v{len(self.lines)}"
            out(f"{indent}{r.choice(_TYPES)} {name} = {self.expr(2)};")
            self.vars.append(name)
        elif choice == 1:
            out(f"{indent}{r.choice(self.vars)} {r.choice(['=', '+=', '*=', '>>=', '|='])} "
                f"{self.expr(2)};")
        elif choice == 2:
            out(f"{indent}y[{r.choice(self.vars)}] = {self.expr(2)};")
        elif choice == 3:
            out(f"{indent}__syncthreads();")
        elif choice == 4:
            out(f"{indent}atomicAdd(&y[{r.choice(self.vars)}], {self.expr(1)});")
        elif choice == 5:
            out(f"{indent}{r.choice(['return;', 'break;', 'continue;', ';', 'goto end;'])}")
        elif choice == 6:
            out(f"{indent}__shared__ {r.choice(_TYPES)} s{len(self.lines)}[{r.choice(['32', 'n', '0', '1 << 20', '-1'])}];")
        elif choice == 7:
            out(f"{indent}#pragma unroll {r.choice(['', '4', '0', 'x'])}")
        elif choice == 8:
            out(indent + r.choice(_TOKENS).strip())
        elif choice in (9, 10):
            out(f"{indent}for (int i{depth} = {self.expr(1)}; i{depth} < {self.expr(1)}; "
                f"i{depth} {r.choice(['++', '+= 32', '*= 2', '--', '= i' + str(depth) + ' + 1'])}) {{")
            self.vars.append(f"i{depth}")
            self.block(depth - 1, indent + "    ")
            out(f"{indent}}}")
        elif choice == 11:
            out(f"{indent}if ({self.expr(2)}) {{")
            self.block(depth - 1, indent + "    ")
            out(f"{indent}}} else {{" if r.random() < 0.5 else f"{indent}}}")
            if self.lines[-1].endswith("{"):
                self.block(depth - 1, indent + "    ")
                out(f"{indent}}}")
        elif choice == 12:
            out(f"{indent}while ({self.expr(1)}) {{")
            self.block(depth - 1, indent + "    ")
            out(f"{indent}}}")
        else:
            out(f"{indent}{{")
            self.block(depth - 1, indent + "    ")
            out(f"{indent}}}")

    def block(self, depth: int, indent: str) -> None:
        for _ in range(self.rng.randint(0, 4)):
            self.stmt(depth, indent)

    def kernel(self) -> str:
        r = self.rng
        head = []
        if r.random() < 0.3:
            head.append(f"#define N {r.choice(['256', '(1 << 10)', 'N', 'x +'])}")
        if r.random() < 0.2:
            head.append("__device__ float helper(float v) { return v * 2.0f; }")
        params = r.choice([
            "const float* x, float* y, int n", "float* x, float* y, int n",
            "const float* __restrict__ x, float* __restrict__ y, unsigned n",
            "const float* x, float* y", "float x, float* y, int n", "const half* x, half* y, int n",
            "const float* x, float* y, int n, ...",
        ])
        template = r.choice(["", "", "template <int T>\n", "template <typename T>\n"])
        self.lines = head + [f"{template}__global__ void k({params}) {{",
                             "    int tid = threadIdx.x + blockIdx.x * blockDim.x;",
                             "    __shared__ float s[256];"]
        self.block(r.choice([1, 2, 3, 6]), "    ")
        self.lines.append("end: ;" if r.random() < 0.05 else "}")
        return "\n".join(self.lines) + "\n"


def generate(rng: random.Random) -> str:
    """A random CUDA-ish kernel (valid, almost valid or outside the subset)."""
    return _Gen(rng).kernel()


def input_for(seed: int, sources: list[tuple[str, str]]) -> str:
    """The fuzz input numbered ``seed``: three in four mutate an example, one in four is
    generated (a generated one is sometimes mutated too)."""
    rng = random.Random(seed)
    if rng.random() < 0.75:
        return mutate(rng, rng.choice(sources)[1])
    text = generate(rng)
    return mutate(rng, text) if rng.random() < 0.3 else text


# -- the oracle -----------------------------------------------------------------------------

def check_loc(exc: KirError, text: str, filename: str) -> None:
    """A KirError about an input must point into that input: file, line and column."""
    loc = exc.loc
    if loc is None:
        raise FuzzFailure(f"KirError without a location: {exc.message}", text)
    if loc.file != filename:
        raise FuzzFailure(f"KirError names file {loc.file!r}, not {filename!r}: {exc}", text)
    lines = max(1, text.count("\n") + 1)
    if not (1 <= loc.line <= lines) or loc.col < 1:
        raise FuzzFailure(f"KirError at {loc} is outside the input ({lines} lines): {exc}", text)


def frontend_outcome(text: str, filename: str = FILENAME) -> str:
    """"kernel" or "error" for one input; :class:`FuzzFailure` when the frontend breaks its
    promise (another exception, an error without location, a kernel that does not print and
    parse back to itself)."""
    from kir.frontends.cuda import load_cuda

    from kir.ir.parser import parse_kernel
    from kir.ir.printer import print_kernel

    try:
        kernel = load_cuda(text, filename, template_values=TEMPLATE_VALUES)
    except KirError as exc:
        check_loc(exc, text, filename)
        return "error"
    except RecursionError as exc:
        raise FuzzFailure(f"RecursionError: {exc}", text) from exc
    except Exception as exc:  # noqa: BLE001 - exactly what the fuzzer hunts
        raise FuzzFailure(f"{type(exc).__name__}: {exc}", text) from exc
    try:
        dumped = print_kernel(kernel)
        again = parse_kernel(dumped, filename="<dump>")
    except Exception as exc:  # noqa: BLE001
        raise FuzzFailure(f"frontend kernel does not print/parse: {type(exc).__name__}: {exc}",
                          text) from exc
    if again != kernel:
        raise FuzzFailure("frontend kernel does not round-trip through IR text", text)
    return "kernel"
