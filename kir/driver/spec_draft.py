"""``kir spec init``: draft a kernel's spec from the host code that launches it.

Everything a spec says is usually at the ``<<<grid, block, shared>>>`` call or just before
it: the sizes (host variables such as ``const int N = 1024``), the launch, template values,
scalar arguments (``Tc = ceil((float)N / Bc)``), the buffers' sizes (``cudaMalloc(&d_x, N *
sizeof(float))``) and how they start (``cudaMemset``, ``cudaMemcpy`` of a host array filled
with ``rand()``). :func:`draft_spec` reads the launch (:mod:`kir.frontends.cuda.launch_sites`),
the kernel's signature and what the kernel writes (its kir IR when the frontend lowers it, its
text otherwise) and writes the spec as TOML, marking every guess and every gap ``# TODO``.
Without a launch site it drafts what the signature alone gives, every size a TODO.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from kir.errors import KirError
from kir.frontends.cuda.host_expr import (FLOAT_TYPES, SIZEOF, HostExprError, Node,
                                          Translator, parse_expr, product_factors)
from kir.frontends.cuda import struct_sizes
from kir.frontends.cuda.instantiations import DTYPES, instantiation_values
from kir.frontends.cuda.launch_sites import HostReader, HostVar, Launch, base_pointer
from kir.frontends.cuda.signature import ParamDecl, Signature, signatures
from kir.spec.toml_text import dumps

LANES = {"float2": 2, "float3": 3, "float4": 4, "int2": 2, "int4": 4, "uint2": 2,
         "uint4": 4, "double2": 2, "half2": 2, "__half2": 2}
GUESS = 1024  # the default given to a size whose value the host code does not show
TENSOR_GUESS = 64  # the same for a size read from a tensor at run time (t.size(0))
RAND_MAX = 2147483647


@dataclass
class Draft:
    """A drafted spec: ``text`` (TOML with ``# TODO`` marks), the kernel, the launch it was
    read from (None without one) and the TODO notes."""

    text: str
    kernel: str
    launch: str | None
    todos: list[str] = field(default_factory=list)


def _dtype(words: Sequence[str], types: dict[str, str]) -> str | None:
    words = [types.get(w, w) for w in words]
    text = " ".join(w for w in words if w not in ("signed",))
    if text in DTYPES:
        return DTYPES[text]
    if len(words) == 1 and words[0] in DTYPES.values():
        return words[0]
    if words and words[-1] in DTYPES:
        return DTYPES[words[-1]] if words[0] != "unsigned" else "u32"
    return None


class _Drafter:
    def __init__(self, launch: Launch | None, signature: Signature, file: str,
                 kernel_text: str, kernel_source: str) -> None:
        self.launch = launch
        self.signature = signature
        self.file = file
        self.kernel_text = kernel_text
        self.kernel_source = kernel_source
        self.variables = launch.variables if launch else {}
        self.sizes: dict[str, int] = {}
        self.comments: dict[tuple[str, ...], str] = {}
        self.todos: list[str] = []
        self.types: dict[str, str] = {}  # typename T -> the instantiation's type text
        self.object_types: set[str] = set()  # typename Act bound to a function object
        # a struct parameter by value -> its fields' arguments (p_theta, dtype), in order
        self.struct_fields: dict[str, tuple[tuple[str, str], ...]] = {}
        self.translator = Translator(self.resolve)
        # t.size(i) read into a host variable: tensor name -> {axis: variable}
        self.tensor_dims: dict[str, dict[int, str]] = {}
        for var in self.variables.values():
            found = _tensor_size(var.expr) if var.expr is not None else None
            if found is not None:
                self.tensor_dims.setdefault(found[0], {})[found[1]] = var.name

    # ------------------------------------------------------------------ host values

    def todo(self, keys: tuple[str, ...], note: str) -> None:
        self.todos.append(f"{'.'.join(keys)}: {note}")
        old = self.comments.get(keys)
        self.comments[keys] = f"{old}; {note}" if old else f"TODO: {note}"

    def resolve(self, name: str):
        var = self.variables.get(name)
        if var is None:
            return None
        base = var.type.split()[-1] if var.type else ""
        is_float = base in FLOAT_TYPES
        if var.param:
            if var.expr is not None:
                return self._size(var, var.expr)
            value = GUESS if not is_float else 1.0
            if not is_float:
                self._add_size(name, value, f"{name} is a parameter of {self.launch.function}"
                                                f"(): {value} is a guess")
                return ("size", value)
            return ("value", value, base)
        if var.expr is None:
            if is_float:
                return None
            self._add_size(name, GUESS, f"{name} has no value before the launch: {GUESS} is "
                                        "a guess")
            return ("size", GUESS)
        return self._size(var, var.expr)

    def _size(self, var: HostVar, node: Node):
        base = var.type.split()[-1] if var.type else ""
        tensor = _tensor_size(node)
        if tensor is not None:
            self._add_size(var.name, TENSOR_GUESS,
                           f"{var.name} is {tensor[0]}.size({tensor[1]}), known at run time "
                           f"only: {TENSOR_GUESS} is a guess")
            return ("size", TENSOR_GUESS)
        is_float = base in FLOAT_TYPES or (not var.type and self.translator.is_float(node))
        picked = _command_line_default(node)
        if picked is not None:
            self._add_size(var.name, picked, f"{var.name} comes from the command line: "
                                             f"{picked} is its default there")
            return ("size", picked)
        if _has_call(node, ("atoi", "atol", "stoi", "strtol", "std::stoi")):
            self._add_size(var.name, GUESS, f"{var.name} comes from the command line: "
                                            f"{GUESS} is a guess")
            return ("size", GUESS)
        if not _names(node):
            try:
                value = self.translator.value(node)
            except HostExprError:
                return None
            if is_float:
                return ("value", float(value), base or "float")
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, int) and value > 0:
                note = f"{var.name} is assigned in a loop: the value at the launch is a " \
                       "guess" if var.assigned_in_loop else None
                self._add_size(var.name, value, note)
                return ("size", value)
            return ("value", value, base or "int")
        return ("expr", self.expand(node), base or ("float" if is_float else "int"))

    def expand(self, node: Node) -> Node:
        """Calls of host helpers that only return an expression (``ceil_div(a, b)``)
        replaced by that expression with the arguments put in."""
        helpers = self.launch.helpers if self.launch else {}

        def visit(n):
            if not isinstance(n, Node):
                return tuple(visit(p) for p in n) if isinstance(n, tuple) else n
            n = Node(n.kind, tuple(visit(p) for p in n.parts), n.is_float)
            name = _name_of(n.parts[0]) if n.kind == "call" else None
            if name in helpers and not helpers[name][2]:
                params, body, _ = helpers[name]
                returned = re.fullmatch(r"\s*return\s+([^;]+);\s*", body)
                inner = _parse(returned.group(1)) if returned else None
                if inner is not None and len(params) == len(n.parts[1]):
                    return visit(_substitute(inner, dict(zip(params, n.parts[1]))))
            return n

        return visit(node)

    def _add_size(self, name: str, value: int, note: str | None) -> None:
        if name not in self.sizes:
            self.sizes[name] = int(value)
            if note:
                self.todo(("sizes",), note)

    def expr(self, node: Node | None, keys: tuple[str, ...], what: str) -> str | int | float:
        """``node`` as a spec expression, else its value (marked), else a gap (marked)."""
        if node is None:
            self.todo(keys, f"{what}: not found in the host code")
            return 1
        node = self.expand(node)
        try:
            text = self.translator.spec(node)
            try:
                value = self.translator.value(node)
            except HostExprError:
                return text
            if re.fullmatch(r"-?\d+", text):
                return int(text)
            if re.fullmatch(r"-?[\d.]+(e-?\d+)?", text) and isinstance(value, float):
                return value
            return text
        except HostExprError as exc:
            try:
                value = self.translator.value(node)
            except HostExprError:
                self.todo(keys, f"{what}: {exc}")
                return 1
            self.todo(keys, f"{what} is {value:g} at these sizes ({exc}); write it as an "
                            "expression of the sizes if it changes with them")
            return value

    # ------------------------------------------------------------------ the spec

    def launch_table(self) -> dict:
        if self.launch is None:
            self.todo(("launch",), "no launch site found: the grid and block are guesses")
            self._add_size("N", GUESS, None)
            return {"grid": ["ceil(N / 256)"], "block": [256]}
        config = self.launch.config
        table = {"grid": self.dims(config[0], ("launch", "grid"), "grid"),
                 "block": self.dims(config[1], ("launch", "block"), "block")}
        if len(config) > 2 and config[2].strip() not in ("0", ""):
            table["shared_bytes"] = self.expr(_parse(config[2]), ("launch",),
                                              "dynamic shared memory")
        return table

    def dims(self, text: str, keys: tuple[str, ...], what: str) -> list:
        node = _parse(text)
        parts: list[Node | None] = [node]
        if node is not None and node.kind == "name":
            var = self.variables.get(node.parts[0])
            if var is not None and var.dims:
                parts = list(var.dims)
        elif node is not None and node.kind == "call" and node.parts[0].kind == "name" \
                and node.parts[0].parts[0] == "dim3":
            parts = list(node.parts[1])
        values = [self.expr(p, keys, what) for p in parts]
        while len(values) > 1 and values[-1] == 1:
            values.pop()
        return values

    def templates(self) -> dict:
        table = {}
        given = self.launch.template_args if self.launch else []
        # without a launch, what the file instantiates explicitly (the frontend's own fallback)
        # (a value only the file's scope gives, an enumerator, is the frontend's to read)
        from_file = {name: value for name, value in
                     instantiation_values(self.kernel_text, self.signature).items()
                     if isinstance(value, (int, str))}
        # what the frontend reads from the file (the launching function's own template
        # arguments resolved), where the launch's text names what the host code here does not
        # define; a value it does define stays an expression of the spec's sizes
        instantiated = dict(from_file)
        for i, (_kind, name) in enumerate(self.signature.template):
            if i < len(given) and set(re.findall(r"[A-Za-z_]\w*", given[i])) <= \
                    set(self.variables):
                instantiated.pop(name, None)
        for i, (kind, name) in enumerate(self.signature.template):
            if name in instantiated:
                value = instantiated[name]
                if kind == "typename" and value in DTYPES.values():
                    # its C name, which a scalar argument of type T is drafted from
                    self.types[name] = given[i].strip() if i < len(given) else _c_name(value)
                if kind == "typename" and value not in DTYPES.values():
                    # a function object of the file: the frontend binds it from the file
                    # itself, and a parameter of that type takes no argument
                    self.object_types.add(name)
                    continue
                table[name] = {"function": value[1:]} if kind == "function" else value
                continue
            if kind == "function":  # T (*ACT_FN)(const T&): the function the launch names
                launched = given[i].split("<", 1)[0].strip() if i < len(given) else ""
                table[name] = {"function": launched or "NAME"}
                if not launched:
                    self.todo(("templates",), f"the launch gives no function for {name}: "
                              "name one of the file's __device__ functions")
                continue
            if i >= len(given):
                deduced = self._deduced_type(name) if kind == "typename" else None
                if deduced is not None:  # k<<<...>>>(half_ptr, ...): T from the argument
                    self.types[name], table[name] = deduced
                elif kind == "typename":
                    self.types[name] = "float"
                    table[name] = "f32"
                    self.todo(("templates",), f"the launch gives no {name}: f32 is a guess")
                else:
                    self.todo(("templates",), f"the launch gives no value for {name}")
                continue
            if kind == "typename":
                self.types[name] = given[i].strip()
                dtype = _dtype(given[i].split(), {})
                if dtype is None and from_file.get(name) in DTYPES.values():
                    dtype = from_file[name]  # T of the launching host template, bound
                    self.types[name] = _c_name(dtype)
                table[name] = dtype or "f32"
                if dtype is None:
                    self.todo(("templates",), f"{name} = {given[i]} is not a kir dtype")
            else:
                table[name] = self.expr(_parse(given[i]), ("templates",),
                                        f"template value {name}")
        return table

    def _deduced_type(self, type_param: str) -> tuple[str, str] | None:
        """(C name, dtype) of ``type_param`` as C++ deduces it from the launch: the host
        declaration of the argument passed for a parameter declared with it."""
        if self.launch is None:
            return None
        names = [p.name for p in self.signature.params]
        for param in self.signature.typed_by(type_param):
            k = names.index(param)
            if k >= len(self.launch.args):
                continue
            var = self.variables.get(base_pointer(self.launch.args[k])[0] or "")
            words = [w for w in (var.type if var else "").replace("*", " ").split()
                     if w not in ("const", "volatile", "__restrict__")]
            c_name = " ".join(words)
            if DTYPES.get(c_name) not in (None, "bool"):
                return c_name, DTYPES[c_name]
        return None

    def args(self, accesses: dict[str, set[str]]) -> dict:
        table = {}
        launch_args = self.launch.args if self.launch else []
        if self.launch and len(launch_args) != len(self.signature.params):
            self.todo(("args",), f"the launch passes {len(launch_args)} arguments, the kernel "
                                 f"takes {len(self.signature.params)}")
        for i, param in enumerate(self.signature.params):
            text = launch_args[i] if i < len(launch_args) else None
            keys = ("args", param.name)
            if not param.pointers and param.type_words[-1:] and \
                    param.type_words[-1] in self.object_types:
                continue  # a function object of the file: it takes no spec argument
            if param.pointers:
                table[param.name] = self.buffer(param, text, keys, accesses)
            elif param.name in self.struct_fields:
                for name, dtype in self.struct_fields[param.name]:
                    field = name[len(param.name) + 1:]
                    table[name] = self.guessed(name, dtype.rstrip("*"), dtype.endswith("*"),
                                               accesses, f"field {field} of the struct "
                                                         f"{param.name}")
            else:
                table[param.name] = self.scalar(param, text, keys)
        self.constant_memory(table, accesses.get("params", ()))
        return table

    def constant_memory(self, table: dict, params) -> None:
        """The ``__constant__`` memory the kernel reads: parameters of its kir IR that are
        neither in its signature nor fields of a struct parameter."""
        from kir.ir.types import PointerType

        known = set(table)
        for param in params:
            if param.name not in known:
                pointer = isinstance(param.type, PointerType)
                table[param.name] = self.guessed(
                    param.name, str(param.type.elem if pointer else param.type), pointer, {},
                    "__constant__ memory the kernel reads (what the host copies there with "
                    "cudaMemcpyToSymbol)")

    def guessed(self, name: str, dtype: str, buffer: bool, accesses: dict, what: str) -> dict:
        """An argument the signature shows no value or size of (a struct's field, constant
        memory): sized or valued N, its role from what the kernel does with it, a TODO
        saying ``what`` it is."""
        self._add_size("N", GUESS, None)
        if not buffer:
            self.todo(("args", name), f"{what}: the value is a guess")
            return {"value": "N", "dtype": dtype}
        entry: dict = {"dtype": dtype, "shape": ["N"]}
        if name in accesses.get("written", set()):
            entry["role"] = "inout" if name in accesses.get("read", set()) else "out"
        self.todo(("args", name), f"{what}: the shape is a guess")
        return entry

    def scalar(self, param: ParamDecl, text: str | None, keys) -> dict:
        dtype = _dtype(param.type_words, self.types)
        entry: dict = {}
        value = self.expr(_parse(text) if text else None, keys, f"value of {param.name}") \
            if text or self.launch else None
        if value is None:
            self._add_size("N", GUESS, None)
            value = "N"
            self.todo(keys, "no launch: the value is a guess")
        entry["value"] = value if isinstance(value, str) else _number_text(value, dtype)
        if dtype:
            entry["dtype"] = dtype
        else:
            self.todo(keys, f"type {param.type_text} has no kir dtype")
        return entry

    def buffer(self, param: ParamDecl, text: str | None, keys, accesses) -> dict:
        words = [self.types.get(w, w) for w in param.type_words]
        dtype = _dtype(words, {}) or "f32"
        lowered = {q.name: q for q in accesses.get("params", ())}.get(param.name)
        if _dtype(words, {}) is None and lowered is not None:
            dtype = str(lowered.type.elem)  # the frontend's: a typedef, or structs' members
            if words and re.search(rf"\b(?:struct|class)\s+(?:\w+\(\d+\)\s+)?{words[-1]}\b",
                                   self.kernel_source):
                self.todo(keys, f"an array of {words[-1]}: kir reads it as {dtype} values, so "
                                f"its shape needs a last axis of the {dtype} values one "
                                f"{words[-1]} holds")
        elif _dtype(words, {}) is None:
            self.todo(keys, f"type {param.type_text} has no kir dtype: f32 is a guess")
        lanes = LANES.get(words[-1], 1)
        elem_bytes = SIZEOF.get(words[-1], 4) // lanes if words[-1] in SIZEOF else 4
        if lowered is not None and words[-1:] == ["void"]:  # raw memory: the dtype's bytes
            elem_bytes = lowered.type.elem.nbytes
        name, offset = base_pointer(text) if text else (None, None)
        var = self.variables.get(name) if name else None
        entry: dict = {"dtype": dtype, "shape": self.shape(var, elem_bytes, lanes, keys)}
        if offset:
            entry["offset"] = self.expr(_parse(offset), keys, "pointer offset")
        written = param.name in accesses.get("written", set())
        read = param.name in accesses.get("read", set())
        atomic_only = param.name in accesses.get("atomic_only", set())
        fill = self.fill_of(var)
        if param.const or not written:
            if not param.const and param.name in accesses.get("known", set()):
                self.comments.setdefault(keys, "not const, but the kernel never writes it")
            entry.update(self.input_range(fill, dtype, keys))
            return entry
        role = "inout" if read and not atomic_only else "out"
        if role == "out" and fill is not None and fill[0] == "random":
            role = "inout"  # data the kernel adds to (atomically) is an output holding data
        entry["role"] = role
        if fill is None:
            if role == "out":
                entry["init"] = "none"
                self.todo(keys, "the host code does not initialize it: init = \"none\" "
                                "means the kernel writes every element (else init = 0)")
            else:
                entry["init"] = "input"
                self.todo(keys, "read and written, but its initial contents are not set in "
                                "the host code")
        elif fill[0] == "const":
            entry["init"] = fill[1]
        else:
            entry["init"] = "input"
            entry.update(self.input_range(fill, dtype, keys))
        return entry

    def shape(self, var: HostVar | None, elem_bytes: int, lanes: int, keys) -> list:
        if var is None:
            self.todo(keys, "its allocation is not in the host code: the shape is a guess")
            self._add_size("N", GUESS, None)
            return ["N"]
        if var.fill and var.fill[0] == "like":
            other = self.variables.get(_name_of(var.fill[1]) or "")
            if other is not None:
                return self.shape(other, elem_bytes, lanes, keys)
        if var.dims:
            return [self.expr(d, keys, "a dimension") for d in var.dims]
        axes = self.tensor_dims.get(var.name)
        if axes and sorted(axes) == list(range(len(axes))):
            for axis in sorted(axes):
                self.resolve(axes[axis])  # registers the size
            self.todo(keys, "a tensor: its shape is its sizes read with .size(i); any "
                            "further axes are missing")
            return [axes[axis] for axis in sorted(axes)]
        if var.count is not None:
            count = var.count
            factor = lanes if var.elem in LANES or (var.elem is None and lanes > 1) else 1
            dims = [self.expr(f, keys, "a dimension") for f in product_factors(count)]
            return dims + ([factor] if factor > 1 else [])
        if var.count_bytes is not None:
            factors = product_factors(self._inline(var.count_bytes))
            sized = [f for f in factors if f.kind == "sizeof"]
            if sized:
                factors.remove(sized[0])
                named = sized[0].parts[0].split()[0]
                size = SIZEOF.get(named) or self.translator.struct_sizes.get(named)
                ratio = size // elem_bytes if size else 1
                dims = [self.expr(f, keys, "a dimension") for f in factors] or [1]
                return dims + ([ratio] if ratio > 1 else [])
            total = self.expr(var.count_bytes, keys, "the allocation")
            self.todo(keys, "the allocation's size is in bytes without sizeof(...): the "
                            "shape divides it by the element size")
            return [f"({total}) // {elem_bytes}" if isinstance(total, str)
                    else int(total) // elem_bytes]
        self.todo(keys, f"no allocation of {var.name} found: the shape is a guess")
        self._add_size("N", GUESS, None)
        return ["N"]

    def _inline(self, node: Node) -> Node:
        """A byte count written through a variable (``bytes``) seen through to its
        definition, so its product factors can be split."""
        if node.kind == "name":
            var = self.variables.get(node.parts[0])
            if var is not None and var.expr is not None and _names(var.expr):
                return self._inline(var.expr)
        return node

    def fill_of(self, var: HostVar | None, depth: int = 0) -> tuple | None:
        """("const", number) or ("random", low, high) or None (not known)."""
        if var is None or var.fill is None or depth > 4:
            return None
        kind = var.fill[0]
        if kind == "memset":
            node = var.fill[1]
            try:
                value = self.translator.value(node) if node is not None else None
            except HostExprError:
                value = None
            if value == 0:
                return ("const", 0)
            return None
        if kind == "copy":
            return self.fill_of(self.variables.get(var.fill[1]), depth + 1) or \
                ("random", None, None)
        if kind in ("value", "loop"):
            return self._fill_expr(var.fill[1])
        if kind == "call":
            params, body, _ = self.launch.helpers.get(var.fill[1], ([], "", False)) \
                if self.launch else ([], "", False)
            match = re.search(r"\w+\s*\[[^\]]*\]\s*=\s*([^;]+);", body)
            node = _parse(match.group(1)) if match else None
            if node is not None:  # the helper's parameters are the call's arguments
                args = [a if isinstance(a, Node) else _parse(a) for a in var.fill[2]]
                node = _substitute(node, dict(zip(params, args)))
            return (self._fill_expr(node) if node is not None else None) or \
                ("random", None, None)
        if kind == "torch":
            function = var.fill[1]
            if function in ("zeros", "empty"):
                return ("const", 0) if function == "zeros" else None
            if function == "ones":
                return ("const", 1)
            if function == "full" and var.fill[2] is not None:
                return self._fill_expr(var.fill[2])
            return ("random", None, None)
        if kind == "like":
            return ("const", 0) if var.fill[2] == "zeros_like" else \
                ("const", 1) if var.fill[2] == "ones_like" else None
        return None

    def _fill_expr(self, node: Node | None) -> tuple | None:
        if node is None:
            return None
        if _has_call(node, ("rand", "random", "drand48", "curand_uniform", "uniform",
                            "normal", "dist", "distribution", "gen")) or \
                _has_name(node, ("RAND_MAX",)):
            modulo = _modulo_of_rand(node)
            if modulo is not None:
                high = self.expr(Node("bin", ("-", modulo, Node("num", (1,)))), (),
                                 "range")
                return ("random", 0, high)
            low, high = (_eval_rand(self.translator, node, value) for value in (0, RAND_MAX))
            if low is None or high is None:
                return ("random", None, None)
            return ("random", min(low, high), max(low, high))
        try:
            value = self.translator.value(node)
        except HostExprError:
            return None
        return ("const", value)

    def input_range(self, fill: tuple | None, dtype: str, keys) -> dict:
        if fill is None or fill[0] != "random" or fill[1] is None:
            if dtype not in ("f32", "f16", "bf16", "f64"):
                self.todo(keys, "integer input of unknown range: give range = [low, high] "
                                "(both included) if it indexes something")
            return {}
        low, high = fill[1], fill[2]
        if isinstance(low, float) and isinstance(high, float) and (low, high) == (-1.0, 1.0):
            return {}
        return {"range": [_round(low), _round(high)]}

    # ------------------------------------------------------------------ together

    def draft(self, accesses: dict[str, set[str]], kernel_note: str | None) -> dict:
        templates = self.templates()
        launch = self.launch_table()
        args = self.args(accesses)
        data: dict = {"kernel": self.signature.name, "sizes": dict(self.sizes)}
        if templates:
            data["templates"] = templates
        data["launch"] = launch
        data["args"] = args
        if not self.sizes:
            data.pop("sizes")
        if kernel_note:
            self.todo(("args",), kernel_note)
        return data


def _round(value):
    if isinstance(value, float):
        return float(f"{value:.6g}")
    return value


def _number_text(value, dtype: str | None):
    if isinstance(value, float) and dtype and dtype.startswith(("i", "u")):
        return int(value) if value.is_integer() else value
    if isinstance(value, float):
        return repr(float(f"{value:.9g}"))
    return value


def _parse(text: str | None) -> Node | None:
    if text is None:
        return None
    try:
        return parse_expr(text)
    except HostExprError:
        return None


def _walk(node):
    if isinstance(node, Node):
        yield node
        for part in node.parts:
            if isinstance(part, (Node, tuple)):
                yield from _walk(part)
    elif isinstance(node, tuple):
        for part in node:
            yield from _walk(part)


def _names(node: Node) -> set[str]:
    called = {id(n.parts[0]) for n in _walk(node) if n.kind == "call"}
    return {n.parts[0] for n in _walk(node) if n.kind == "name" and id(n) not in called
            and n.parts[0] not in ("INFINITY", "FLT_MAX", "M_PI", "true", "false")}


def _name_of(node) -> str | None:
    return node.parts[0] if isinstance(node, Node) and node.kind == "name" else None


def _substitute(node, names: dict):
    """``node`` with each name in ``names`` replaced by its node."""
    if isinstance(node, tuple):
        return tuple(_substitute(p, names) for p in node)
    if not isinstance(node, Node):
        return node
    if node.kind == "name" and node.parts[0] in names and names[node.parts[0]] is not None:
        return names[node.parts[0]]
    return Node(node.kind, tuple(_substitute(p, names) for p in node.parts), node.is_float)


def _tensor_size(node: Node) -> tuple[str, int] | None:
    """``Q.size(0)`` / ``Q.sizes()[0]`` / ``Q.shape[0]`` → ("Q", 0)."""
    if node.kind == "call" and node.parts[0].kind == "member" \
            and node.parts[0].parts[1] == "size" and len(node.parts[1]) == 1 \
            and node.parts[1][0].kind == "num":
        target = node.parts[0].parts[0]
        if target.kind == "name":
            return target.parts[0], int(node.parts[1][0].parts[0])
    if node.kind == "index" and node.parts[1].kind == "num":
        inner = node.parts[0]
        if inner.kind == "call" and inner.parts[0].kind == "member" \
                and inner.parts[0].parts[1] == "sizes":
            inner = inner.parts[0].parts[0]
        elif inner.kind == "member" and inner.parts[1] == "shape":
            inner = inner.parts[0]
        if inner.kind == "name":
            return inner.parts[0], int(node.parts[1].parts[0])
    return None


def _has_call(node: Node, names: tuple[str, ...]) -> bool:
    return any(n.kind == "call" and _name_of(n.parts[0]) is not None and
               (_name_of(n.parts[0]) in names or _name_of(n.parts[0]).split("::")[-1] in names
                or _name_of(n.parts[0]).split(".")[-1] in names) for n in _walk(node))


def _has_name(node: Node, names: tuple[str, ...]) -> bool:
    return any(n.kind == "name" and n.parts[0] in names for n in _walk(node))


def _modulo_of_rand(node: Node) -> Node | None:
    for n in _walk(node):
        if n.kind == "bin" and n.parts[0] == "%" and _has_call(n.parts[1], ("rand", "random")):
            return n.parts[2]
    return None


def _eval_rand(translator: Translator, node: Node, rand: int):
    def swap(n):
        if n.kind == "call" and _name_of(n.parts[0]) in ("rand", "random", "std::rand"):
            return Node("num", (rand,))
        if n.kind == "name" and n.parts[0] == "RAND_MAX":
            return Node("num", (RAND_MAX,))
        parts = tuple(swap(p) if isinstance(p, Node) else
                      tuple(swap(q) for q in p) if isinstance(p, tuple) and p and
                      isinstance(p[0], Node) else p for p in n.parts)
        return Node(n.kind, parts, n.is_float)
    try:
        value = translator.value(swap(node))
        return float(value)
    except (HostExprError, ZeroDivisionError, TypeError):
        return None


def _command_line_default(node: Node) -> int | None:
    """``argc > 1 ? atoi(argv[1]) : 1024`` → 1024."""
    if node.kind != "cond":
        return None
    cond, yes, no = node.parts
    if _has_name(cond, ("argc",)) or _has_name(yes, ("argv",)):
        if no.kind == "num" and isinstance(no.parts[0], int):
            return no.parts[0]
    return None


def _accesses(kernel_source: str, file: str, signature: Signature,
              templates: dict) -> tuple[dict[str, set[str]], str | None]:
    """Which pointer parameters the kernel reads, writes and only atomically updates: from
    its kir IR when the frontend lowers it, else from its text."""
    from kir import ir
    from kir.frontends.cuda import load_cuda

    values = {k: v for k, v in templates.items() if v is not None}
    try:
        kernel = load_cuda(kernel_source, file, kernel=signature.name, template_values=values)
    except KirError as exc:
        return _text_accesses(kernel_source, signature), \
            f"kir's frontend cannot lower {signature.name} ({exc.message}): roles come from " \
            "reading its text"
    written = {n.buffer for n in kernel.walk() if isinstance(n, (ir.Store, ir.Atomic,
                                                                   ir.MatrixStore))}
    read = {n.buffer for n in kernel.walk() if isinstance(n, (ir.Load, ir.MatrixLoad))}
    atomic = {n.buffer for n in kernel.walk() if isinstance(n, ir.Atomic)}
    plain = {n.buffer for n in kernel.walk() if isinstance(n, (ir.Store, ir.MatrixStore))}
    return {"written": written, "read": read, "atomic_only": (atomic - plain) - read,
            "known": {p.name for p in kernel.params}, "params": kernel.params}, None


def _text_accesses(source: str, signature: Signature) -> dict[str, set[str]]:
    written, read = set(), set()
    for p in signature.params:
        name = re.escape(p.name)
        if re.search(rf"\b{name}\s*\[[^\]]*\]\s*(?:[-+*/|&^]?=)(?!=)|\*\s*\(?\s*{name}\b[^;]*?"
                     rf"\)?\s*=(?!=)|atomic\w*\s*\(\s*&?\s*{name}\b", source):
            written.add(p.name)
        if re.search(rf"\b{name}\s*\[", source):
            read.add(p.name)
    return {"written": written, "read": read, "atomic_only": set()}


def draft_spec(path: str | Path, *, kernel: str | None = None,
               host: Sequence[str | Path] = ()) -> Draft:
    """Draft the spec of ``kernel`` (the only one, or the one launched, when None) in the
    CUDA file ``path``, reading launch sites there and in the ``host`` files."""
    from kir.driver.load import read_text
    from kir.frontends.cuda.preprocess import preprocess

    path = Path(path)
    source = read_text(path)
    text = preprocess(source, str(path), None).text
    found = signatures(text)
    if not found:
        raise KirError(f"{path}: no __global__ function", hint="is this the right file?")
    readers = [(path, HostReader(text))]
    for other in host:
        other = Path(other)
        readers.append((other, HostReader(preprocess(read_text(other), str(other),
                                                     None).text)))
    names = {s.name for s in found}
    launches: list[tuple[Path, str, Launch]] = []
    for file, reader in readers:
        launches += [(file, reader.text, launch) for launch in reader.launches(names)]
    if kernel is None:
        launched = sorted({launch.kernel for _, _, launch in launches})
        if len(found) == 1:
            kernel = found[0].name
        elif len(launched) == 1:
            kernel = launched[0]
        else:
            raise KirError(f"{path} has several kernels ({', '.join(s.name for s in found)})",
                           hint="pick one with --kernel NAME")
    signature = next((s for s in found if s.name == kernel), None)
    if signature is None:
        raise KirError(f"{path} has no __global__ function {kernel!r} (found: "
                       f"{', '.join(s.name for s in found)})")
    mine = [(file, file_text, launch) for file, file_text, launch in launches
            if launch.kernel == kernel]
    launch = mine[0][2] if mine else None
    drafter = _Drafter(launch, signature, str(path), text, source)
    drafter.struct_fields = _struct_fields(source, path, kernel)
    drafter.translator.struct_sizes = struct_sizes(source, str(path))
    templates = drafter.templates()
    from kir.ir.types import SCALARS

    accesses, kernel_note = _accesses(source, str(path), signature, {
        name: (value if isinstance(value, str) and value in SCALARS
               else "&" + value["function"] if isinstance(value, dict)  # a function: &name
               else _int_or_none(drafter, value)) for name, value in templates.items()})
    drafter.todos.clear()
    drafter.comments.clear()
    drafter.sizes.clear()
    data = drafter.draft(accesses, kernel_note)
    where = None
    if launch is not None:
        file, file_text, _ = mine[0]
        line = file_text.count("\n", 0, launch.offset) + 1
        call = f"{launch.kernel}<<<{', '.join(launch.config)}>>>"
        where = f"{file}:{line}"
        header = (f"Drafted by `kir spec init` from the launch at {file.name}:{line} in "
                  f"{launch.function or 'file scope'}():\n  {call}({', '.join(launch.args)})")
        if len(mine) > 1:
            header += f"\n({len(mine) - 1} other launch(es) of {kernel} not read)"
    else:
        header = (f"Drafted by `kir spec init` from {kernel}'s signature alone: no launch "
                  "site was found\n(pass the host files with --host FILE). Every size and "
                  "the launch are guesses.")
    header += ("\nCheck each TODO, then: kir run " + path.name +
               "\nAdd reference = \"refs:NAME\" (a numpy function in refs.py beside this "
               "file)\nfor an independent check; until then the interpreter's run of the "
               "kernel is the reference.")
    text = dumps(data, drafter.comments, header)
    return Draft(text, kernel, where, drafter.todos)


def _c_name(dtype: str) -> str:
    """The first C name :data:`DTYPES` gives ``dtype`` (``"f16"`` -> ``half``)."""
    return next(c for c, d in DTYPES.items() if d == dtype)


def _struct_fields(source: str, path: Path, kernel: str) -> dict[str, tuple]:
    """The by-value struct parameters of ``kernel`` and the scalar arguments their fields
    become (``{"p": (("p_theta", "f32"), ...)}``); none where the frontend cannot tell."""
    from kir.frontends.cuda import kernel_params

    try:
        return {p.name: p.fields for p in kernel_params(source, str(path), kernel) if p.fields}
    except KirError:
        return {}


def _int_or_none(drafter: _Drafter, value):
    if isinstance(value, int):
        return value
    try:
        from kir.spec.sizeexpr import eval_size_expr

        result = eval_size_expr(value, drafter.sizes)
        return int(result) if float(result).is_integer() else None
    except KirError:
        return None


__all__ = ["Draft", "draft_spec"]
