"""Launch sites in host code: ``kernel<<<grid, block, shared>>>(args)`` and what the host
code around it says about the arguments.

The frontend's scanner skips host code; this module reads just enough of it to draft a spec
(:mod:`kir.driver.spec_draft`): each launch's configuration and argument expressions, and
for the host variables they mention their declarations, last assignments before the launch,
device allocations (``cudaMalloc``, ``malloc``, ``std::vector``, ``thrust`` vectors,
``torch`` tensors), fills (``cudaMemset``, ``cudaMemcpy`` from host arrays, ``std::fill``,
fill loops) and the parameters of the host function the launch is in. It reads statements
with a brace- and parenthesis-aware splitter and expressions with
:mod:`kir.frontends.cuda.host_expr`; whatever it cannot read it leaves out, and the drafter
marks the gap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kir.frontends.cuda.host_expr import HostExprError, Node, parse_expr
from kir.frontends.cuda.scan import scan_units
from kir.frontends.cuda.signature import split_top_level

_LAUNCH = re.compile(r"\b([A-Za-z_]\w*)\s*(<(?:[^<>;]|<[^<>;]*>)*>)?\s*<<<")
_DECL = re.compile(
    r"^(?:(?:static|const|constexpr|volatile|register|unsigned|signed|long|short)\s+)*"
    r"(?P<type>(?:unsigned\s+|signed\s+|long\s+|short\s+)*"
    r"(?:[A-Za-z_][\w:]*)(?:\s*<[^;]*?>)?)\s*(?P<rest>[*&\s]*[A-Za-z_]\w*\s*(?:[=({\[;,].*)?)$",
    re.DOTALL)
_CONTROL = re.compile(r"^\s*(for|while|if|else\s+if|switch)\s*\(")
_ALLOC_CALLS = ("cudaMalloc", "cudaMallocManaged", "cudaMallocHost", "cudaMallocAsync")
_WRAPPERS = ("cudaCheck", "CUDA_CHECK", "checkCudaErrors", "CHECK_CUDA", "gpuErrchk",
             "cudaCheckError", "CUDA_CALL", "C10_CUDA_CHECK")
_SCALAR_TYPES = {"int", "unsigned", "long", "short", "size_t", "float", "double", "bool",
                 "int64_t", "uint64_t", "int32_t", "uint32_t", "auto", "uint", "half",
                 "__half", "ptrdiff_t", "char", "int8_t", "uint8_t", "int16_t", "uint16_t"}
_NOT_TYPES = {"return", "delete", "throw", "goto", "case", "new", "else", "do", "printf",
              "std::cout", "using", "typedef"}


@dataclass
class Statement:
    """One host statement: its text (control headers stripped), offset, and whether it sits
    in a loop body (``loop``: the loop header's text)."""

    text: str
    offset: int
    loop: str | None = None


@dataclass
class HostVar:
    """What host code says about one variable (see the module docstring). ``expr``: its
    value (declaration or last assignment before the launch); ``dims``: a ``dim3``'s or a
    tensor's components; ``count``/``count_bytes``: an allocation's element or byte count
    (``elem``: the element type the allocation names, if any); ``fill``: ``("memset",
    node)``, ``("copy", name)``, ``("value", node)``, ``("loop", node)`` or ``("call",
    name)``; ``param``: a parameter of the host function (its value is the caller's)."""

    name: str
    type: str = ""
    expr: Node | None = None
    dims: list[Node] = field(default_factory=list)
    count: Node | None = None
    count_bytes: Node | None = None
    elem: str | None = None
    fill: tuple | None = None
    param: bool = False
    offset: int = 0
    pointer: bool = False
    assigned_in_loop: bool = False


@dataclass
class Launch:
    """One ``kernel<<<config>>>(args)``: texts of the template arguments, the configuration
    (grid, block, shared bytes, stream) and the arguments; the host function it is in and
    what that function (and file-scope declarations) say about the variables."""

    kernel: str
    template_args: list[str]
    config: list[str]
    args: list[str]
    offset: int
    function: str
    variables: dict[str, HostVar]
    # host function name -> (parameter names, body text, returns a pointer)
    helpers: dict[str, tuple[list[str], str, bool]] = field(default_factory=dict)


def _match_close(text: str, start: int, open_: str, close: str) -> int:
    """Index of the bracket closing the one at ``start`` (strings skipped); -1 if none."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < len(text) and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def host_functions(text: str) -> list[tuple[str, int, int, str, str]]:
    """Top-level host function definitions: (name, body start, body end, parameter text,
    the header before the name, e.g. ``float*`` or ``static int``).
    ``__global__``/``__device__`` functions are left out."""
    device = {(u.start, u.end) for u in scan_units(text) if u.kind in ("global", "device")}
    out, i, depth = [], 0, 0
    scope_start = 0
    while i < len(text):
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < len(text) and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "{":
            header = text[scope_start:i]
            close = _match_close(text, i, "{", "}")
            if close < 0:
                break
            stripped = header.rstrip()
            if re.search(r"\)\s*(const\s*)?$", stripped) and not re.search(
                    r"\b(namespace|struct|class|enum|union)\b", header):
                paren_close = len(stripped) - 1 if stripped.endswith(")") else \
                    stripped.rfind(")")
                paren_open = _find_open(stripped, paren_close)
                name = re.search(r"([A-Za-z_]\w*)\s*$", stripped[:paren_open])
                inside = any(s <= i < e for s, e in device)
                if name and not inside and "__global__" not in header \
                        and "__device__" not in header.split("\n")[-1]:
                    before = stripped[:paren_open][:name.start()].strip().split("\n")[-1]
                    out.append((name.group(1), i + 1, close,
                                stripped[paren_open + 1:paren_close], before))
                i = close + 1
                scope_start = i
                continue
            if re.search(r'\b(namespace\b[\w\s:]*|extern\s*"C"\s*)$', stripped):
                scope_start = i + 1
                i += 1
                continue
            i = close + 1
            scope_start = i
            continue
        if c == ";" and depth == 0:
            scope_start = i + 1
        elif c == "}":
            scope_start = i + 1
        i += 1
    return out


def _find_open(text: str, close: int) -> int:
    depth = 0
    for k in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(text[k], 0)
        if depth == 0:
            return k
    return 0


def statements(text: str, start: int, end: int) -> list[Statement]:
    """The statements of ``text[start:end]`` in order, control headers stripped and loop
    bodies marked."""
    out: list[Statement] = []
    loops: list[str | None] = [None]  # the loop each open brace belongs to
    i, begin = start, start
    pending: str | None = None  # a loop header whose body is the next statement or block
    while i < end:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < end and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            close = _match_close(text, i, "(", ")")
            i = close + 1 if close > 0 else i + 1
            continue
        if c in "{};":
            piece = text[begin:i]
            header, body = _strip_control(piece)
            if c == "{" and not body.strip():
                loops.append(header or pending or (loops[-1] if not header else None))
                pending = None
            elif c == "{" and "=" in body and body.rstrip().endswith(("=", ")")):
                # a braced initializer: float x[] = {...}; or a lambda: keep going
                close = _match_close(text, i, "{", "}")
                i = close + 1 if close > 0 else i + 1
                continue
            elif c == "{":
                # `dim3 g{a, b}` or `std::vector<int> v{...}`: a brace initializer
                close = _match_close(text, i, "{", "}")
                i = close + 1 if close > 0 else i + 1
                continue
            else:
                loop = header or pending or loops[-1]
                if body.strip():
                    out.append(Statement(body.strip(), begin + piece.find(body.strip()),
                                         loop))
                pending = None
                if c == "}" and len(loops) > 1:
                    loops.pop()
            begin = i + 1
        i += 1
    return out


def _strip_control(piece: str) -> tuple[str | None, str]:
    """(the innermost loop header the piece starts with, the statement after headers)."""
    loop = None
    rest = piece
    while True:
        stripped = rest.lstrip()
        if stripped.startswith("else") and not re.match(r"else\s+if\b", stripped):
            rest = stripped[4:]
            continue
        if stripped.startswith("do") and re.match(r"do\b", stripped):
            loop = "do"
            rest = stripped[2:]
            continue
        match = _CONTROL.match(stripped)
        if not match:
            return loop, rest
        open_at = stripped.index("(", match.start(1))
        close = _match_close(stripped, open_at, "(", ")")
        if close < 0:
            return loop, rest
        if match.group(1) in ("for", "while"):
            loop = stripped[:close + 1]
        rest = stripped[close + 1:]


def _parse(text: str) -> Node | None:
    try:
        return parse_expr(text)
    except HostExprError:
        return None


def _unwrap_call(text: str) -> str:
    """``cudaCheck(cudaMalloc(...))`` → ``cudaMalloc(...)``."""
    stripped = text.strip()
    for wrapper in _WRAPPERS:
        if stripped.startswith(wrapper) and stripped[len(wrapper):].lstrip().startswith("("):
            inner = stripped[stripped.index("(") + 1:stripped.rindex(")")]
            return _unwrap_call(inner)
    return stripped


def _call_parts(text: str) -> tuple[str, list[str]] | None:
    match = re.match(r"^([A-Za-z_][\w:]*(?:<[^()]*>)?)\s*\((.*)\)$", text.strip(), re.DOTALL)
    if not match:
        return None
    return match.group(1), split_top_level(match.group(2))


def _target_name(text: str) -> str | None:
    """The variable an ``&d_x`` / ``(void**)&d_x`` / ``d_x`` argument names."""
    match = re.search(r"&\s*([A-Za-z_]\w*)\s*$", text.strip()) or \
        re.match(r"^\s*([A-Za-z_]\w*)\s*$", text)
    return match.group(1) if match else None


def base_pointer(text: str) -> tuple[str | None, str | None]:
    """A pointer argument's variable and offset text: ``d_x`` → (d_x, None), ``d_x + n`` →
    (d_x, "n"), ``&d_x[n]`` → (d_x, "n"), ``v.data()`` / ``raw_pointer_cast(v.data())`` /
    ``t.data_ptr<float>()`` / ``(float*)d_x`` → (v, None)."""
    text = text.strip()
    call = re.match(r"^(?:thrust::)?raw_pointer_cast\s*\((.*)\)$", text, re.DOTALL)
    if call:
        return base_pointer(call.group(1))
    text = re.sub(r"^\(\s*[\w\s:<>]*\*\s*\)\s*", "", text)  # a C cast
    text = re.sub(r"^reinterpret_cast<[^>]*>\s*\((.*)\)$", r"\1", text, flags=re.DOTALL)
    member = re.match(r"^([A-Za-z_]\w*)\s*(?:\.|->)\s*(?:data|data_ptr|get)\s*(?:<[^>]*>)?"
                      r"\s*\(\s*\)$", text)
    if member:
        return member.group(1), None
    index = re.match(r"^&\s*([A-Za-z_]\w*)\s*\[(.*)\]$", text, re.DOTALL)
    if index:
        return index.group(1), index.group(2).strip()
    plus = re.match(r"^\(?\s*([A-Za-z_]\w*)\s*\+\s*(.+?)\)?$", text, re.DOTALL)
    if plus and not text.startswith("("):
        return plus.group(1), plus.group(2).strip()
    name = re.match(r"^([A-Za-z_]\w*)$", text)
    return (name.group(1), None) if name else (None, None)


class HostReader:
    """Reads the host facts of one function (and file scope) up to a launch."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.functions = host_functions(text)
        self.helpers = {name: (_param_names(params), text[start:end], "*" in before)
                        for name, start, end, params, before in self.functions}

    def file_scope(self) -> list[Statement]:
        """Declarations outside any function (``const int N = 1024;`` at file scope)."""
        device = [(u.start, u.end) for u in scan_units(self.text)
                  if u.kind in ("global", "device")]
        spans = sorted([(s - 1, e + 1) for _, s, e, _, _ in self.functions] + device)
        out, pos = [], 0
        for start, end in spans:
            out += [s for s in statements(self.text, pos, max(start, pos))
                    if "(" not in s.text.split("=", 1)[0]]
            pos = max(pos, end)
        out += [s for s in statements(self.text, pos, len(self.text))
                if "(" not in s.text.split("=", 1)[0]]
        return out

    def launches(self, kernel_names: set[str]) -> list[Launch]:
        """Every launch of one of ``kernel_names`` in host code, in source order."""
        found = []
        for match in _LAUNCH.finditer(self.text):
            name = match.group(1)
            if name not in kernel_names:
                continue
            config_start = match.end()
            config_end = self.text.find(">>>", config_start)
            if config_end < 0:
                continue
            open_at = self.text.find("(", config_end + 3)
            close = _match_close(self.text, open_at, "(", ")") if open_at >= 0 else -1
            if close < 0:
                continue
            function = next(((n, s, e, p) for n, s, e, p, _ in self.functions
                             if s <= match.start() < e), None)
            targs = split_top_level(match.group(2)[1:-1]) if match.group(2) else []
            variables = self.variables(function, match.start())
            if function is not None:
                variables = self.with_caller(function, variables)
            found.append(Launch(name, targs,
                                split_top_level(self.text[config_start:config_end]),
                                split_top_level(self.text[open_at + 1:close]),
                                match.start(), function[0] if function else "",
                                variables, self.helpers))
        return found

    def variables(self, function, before: int) -> dict[str, HostVar]:
        found: dict[str, HostVar] = {}
        for statement in self.file_scope():
            self.read(statement, found)
        if function is not None:
            _, start, end, params = function
            for text in split_top_level(params):
                self.read_param(text, found)
            for statement in statements(self.text, start, min(end, before)):
                self.read(statement, found)
        return found

    def with_caller(self, function, variables: dict[str, HostVar]) -> dict[str, HostVar]:
        """A launch inside a host helper (``void run(float* x, int n) { k<<<>>>(x, n); }``)
        called once in the file: the helper's parameters take the caller's values."""
        name, _, _, params = function
        calls = [m for m in re.finditer(rf"\b{re.escape(name)}\s*\(", self.text)
                 if not any(s <= m.start() < e for n, s, e, _, _ in self.functions
                            if n == name)]
        callers = [(m, next(((n, s, e, p) for n, s, e, p, _ in self.functions
                             if s <= m.start() < e), None)) for m in calls]
        callers = [(m, f) for m, f in callers if f is not None]
        if len(callers) != 1:
            return variables
        match, caller = callers[0]
        close = _match_close(self.text, match.end() - 1, "(", ")")
        args = split_top_level(self.text[match.end():close])
        outer = self.variables(caller, match.start())
        merged = dict(outer)
        merged.update({k: v for k, v in variables.items() if not v.param})
        for param, arg in zip(_param_names(params), args):
            source, _ = base_pointer(arg)
            if source in outer:
                alias = HostVar(**{**outer[source].__dict__, "name": param})
                merged[param] = alias
            else:
                merged[param] = HostVar(param, variables.get(param, HostVar(param)).type,
                                        expr=_parse(arg))
        return merged

    def read_param(self, text: str, found: dict[str, HostVar]) -> None:
        match = _DECL.match(text.strip())
        if not match:
            return
        name = re.search(r"([A-Za-z_]\w*)\s*(?:=.*)?$", match.group("rest").strip())
        if not name:
            return
        var = HostVar(name.group(1), _type_text(match.group("type")), param=True,
                      pointer="*" in match.group("rest") or "Tensor" in match.group("type"))
        default = re.search(r"=\s*(.+)$", match.group("rest"))
        if default:
            var.expr = _parse(default.group(1))
        found[var.name] = var

    def read(self, statement: Statement, found: dict[str, HostVar]) -> None:
        text = _strip_parens(_unwrap_call(statement.text))
        call = _call_parts(text)
        if call is not None and self.read_call(call, found, statement):
            return
        assign = re.match(r"^([A-Za-z_]\w*)\s*(\[(.*)\])?\s*=(?!=)\s*(.+)$", text, re.DOTALL)
        if assign:
            name, index, value = assign.group(1), assign.group(2), assign.group(4)
            inner = _call_parts(_unwrap_call(value))
            if inner is not None and self.read_call(inner, found, statement):
                return  # err = cudaMalloc(...)
            var = found.setdefault(name, HostVar(name, offset=statement.offset))
            if index:
                if statement.loop:  # a fill loop: h_x[i] = rand() / RAND_MAX;
                    var.fill = ("loop", _parse(value))
                return
            self.read_value(var, value, statement)
            return
        decl = _DECL.match(text)
        if decl and decl.group("type").split("<")[0].strip() not in _NOT_TYPES:
            type_text = _type_text(decl.group("type"))
            for part in split_top_level(decl.group("rest")):
                self.read_declarator(type_text, part, found, statement)

    def read_declarator(self, type_text: str, part: str, found: dict[str, HostVar],
                        statement: Statement) -> None:
        match = re.match(r"^([*&\s]*)([A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*(.*)$", part.strip(),
                         re.DOTALL)
        if not match:
            return
        stars, name, array, rest = match.groups()
        var = HostVar(name, type_text, offset=statement.offset,
                      pointer="*" in stars or bool(array))
        if array and array.strip("[] "):
            var.count = _parse(array.strip("[]"))
        rest = rest.strip()
        if rest.startswith("="):
            self.read_value(var, rest[1:].strip(), statement)
        elif rest.startswith("(") or rest.startswith("{"):
            close = _match_close(rest, 0, rest[0], ")" if rest[0] == "(" else "}")
            items = [_parse(t) for t in split_top_level(rest[1:close])]
            self.read_constructed(var, type_text, items)
        found[name] = var

    def read_constructed(self, var: HostVar, type_text: str, items: list) -> None:
        """``dim3 g(a, b)``, ``std::vector<float> h(n, v)``, ``thrust::device_vector<T>
        d(n)``, ``torch::Tensor t(...)``."""
        base = type_text.split("<")[0]
        if base == "dim3":
            var.dims = [i for i in items if i is not None]
        elif base.endswith("vector"):
            var.pointer = True
            var.elem = _template_arg(type_text)
            if items and items[0] is not None:
                var.count = items[0]
            if len(items) > 1 and items[1] is not None:
                var.fill = ("value", items[1])
        elif items and items[0] is not None and len(items) == 1:
            var.expr = items[0]

    def read_value(self, var: HostVar, value: str, statement: Statement) -> None:
        node = _parse(value)
        if statement.loop:
            var.assigned_in_loop = True
        if node is None:
            return
        kind = node.kind
        if kind == "call":
            name = node.parts[0].parts[0] if node.parts[0].kind == "name" else ""
            args = node.parts[1]
            if name in ("malloc", "calloc", "std::malloc"):
                var.pointer = True
                var.count_bytes = args[0] if name != "calloc" else _times(args[0], args[1])
                if name == "calloc":
                    var.fill = ("value", Node("num", (0,)))
                return
            if name == "dim3":
                var.type, var.dims = "dim3", list(args)
                return
            torch = re.match(r"^(?:torch::|at::)?(zeros|ones|empty|randn|rand|randint|full|"
                             r"zeros_like|ones_like|empty_like|randn_like)$", name)
            if torch:
                var.pointer, var.type = True, "tensor"
                if torch.group(1).endswith("_like"):
                    var.fill = ("like", args[0], torch.group(1))
                    return
                shape = args[0] if args else None
                var.dims = list(shape.parts) if shape is not None and \
                    shape.kind == "braces" else ([shape] if shape is not None else [])
                var.fill = ("torch", torch.group(1), args[1] if len(args) > 1 else None)
                return
            if name in self.helpers and args and self.helpers[name][2]:
                # a host helper returning an array: make_random_float(N)
                var.pointer = True
                var.count = args[0]
                var.fill = ("call", name, args)
                return
        if kind == "cast" and node.parts[1].kind == "call":
            inner = node.parts[1]
            if inner.parts[0].kind == "name" and inner.parts[0].parts[0] in ("malloc",
                                                                             "calloc"):
                var.pointer = True
                var.elem = node.parts[0].replace("*", "").strip()
                var.count_bytes = inner.parts[1][0]
                return
        if value.startswith("new "):
            match = re.match(r"new\s+([\w:]+)\s*\[(.*)\]", value, re.DOTALL)
            if match:
                var.pointer, var.elem = True, match.group(1)
                var.count = _parse(match.group(2))
                return
        var.expr = node

    def read_call(self, call: tuple[str, list[str]], found: dict[str, HostVar],
                  statement: Statement) -> bool:
        name, args = call
        if name in self.helpers and args and not self.helpers[name][2]:
            # fill_matrix(A, m * k): a helper filling its first argument
            target, _ = base_pointer(args[0])
            if target in found:
                found[target].fill = ("call", name, tuple(_parse(a) for a in args))
                return True
        if name in _ALLOC_CALLS and len(args) >= 2:
            target = _target_name(args[0])
            if target:
                var = found.setdefault(target, HostVar(target, offset=statement.offset))
                var.pointer = True
                var.count_bytes = _parse(args[1])
            return True
        if name in ("cudaMemset", "cudaMemsetAsync", "memset") and len(args) >= 2:
            target, _ = base_pointer(args[0])
            if target in found:
                found[target].fill = ("memset", _parse(args[1]))
            return True
        if name in ("cudaMemcpy", "cudaMemcpyAsync", "memcpy", "std::memcpy") \
                and len(args) >= 2:
            target, _ = base_pointer(args[0])
            source, _ = base_pointer(args[1])
            if target in found and source:
                if not (len(args) > 3 and "DeviceToHost" in args[3]):
                    found[target].fill = ("copy", source)
            return True
        if name in ("std::fill", "thrust::fill", "std::fill_n", "thrust::fill_n") and args:
            target = re.match(r"^\s*([A-Za-z_]\w*)", args[0])
            if target and target.group(1) in found:
                found[target.group(1)].fill = ("value", _parse(args[-1]))
            return True
        # a checking wrapper around the call that matters: (check(cudaMalloc(...), __FILE__))
        return any(self.read_call(inner, found, statement) for inner in
                   filter(None, (_call_parts(_unwrap_call(_strip_parens(a))) for a in args
                                 if "(" in a)))


def _strip_parens(text: str) -> str:
    """``((x))`` → ``x``: only parentheses that enclose the whole text."""
    text = text.strip()
    while text.startswith("(") and _match_close(text, 0, "(", ")") == len(text) - 1:
        text = text[1:-1].strip()
    return text


def _param_names(params: str) -> list[str]:
    names = []
    for text in split_top_level(params):
        match = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*(?:=.*)?$", text.strip())
        if match and match.group(1) != "void":
            names.append(match.group(1))
    return names


def _times(a: Node, b: Node) -> Node:
    return Node("bin", ("*", a, b))


def _template_arg(type_text: str) -> str | None:
    match = re.search(r"<\s*([\w:\s]+?)\s*>", type_text)
    return match.group(1) if match else None


def _type_text(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip())
