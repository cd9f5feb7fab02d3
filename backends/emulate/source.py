"""Source rewrites that let GPU kernel text compile as C++ under the emulator's shims.

All rewrites keep line numbers (and mostly columns) so compiler errors and barrier reports
point at the user's lines.

- ``threadgroup`` / ``__shared__`` declarations of arrays or scalars become function-local
  ``static`` variables (groups run one after another, so a static is exactly the group's memory)
  registered for poisoning; the keyword is dropped where it qualifies a pointer, a reference or
  a parameter, because a static pointer would keep the first thread's value.
- ``extern __shared__ T x[];`` becomes a pointer to the launch's dynamic shared memory.
- Host code in an original ``.cu`` file (functions that are neither ``__global__`` nor
  ``__device__``, e.g. ``main`` with its ``<<<...>>>`` launches) is blanked out.
"""

from __future__ import annotations

import re

from kir.frontends.cuda.parser import template_header_length

_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def mask(text: str, *, directives: bool = False) -> str:
    """``text`` with comments and string/char literals (and optionally preprocessor lines)
    replaced by spaces, newlines kept: positions in the mask are positions in ``text``."""
    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    masked = _TOKEN.sub(blank, text)
    if directives:
        masked = re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", blank, masked)
    return masked


def _declaration_end(masked: str, start: int) -> tuple[int, str]:
    """From ``start``: the index and character of the first ``;`` or ``,`` at depth 0, or of an
    unmatched closing bracket (the end of a parameter list)."""
    depth = 0
    for index in range(start, len(masked)):
        ch = masked[index]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return index, ch
            depth -= 1
        elif ch in ";," and depth == 0:
            return index, ch
    return len(masked), ""


def _split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _strip_nested(text: str) -> str:
    previous = None
    while previous != text:
        previous = text
        text = re.sub(r"\[[^\[\]]*\]|<[^<>]*>|\([^()]*\)", "", text)
    return text


def rewrite_group_memory(text: str, keyword: str) -> str:
    """Rewrite ``threadgroup`` (Metal) or ``__shared__`` (CUDA) declarations, see the module doc."""
    masked = mask(text)
    pieces: list[str] = []
    position = 0
    counter = 0
    for match in re.finditer(rf"\b{re.escape(keyword)}\b", masked):
        if match.start() < position:
            continue
        end, stop = _declaration_end(masked, match.end())
        # a declaration list `threadgroup float a[4], b[4];` continues past its commas
        while stop == "," and not _is_parameter(masked, match.start()):
            end, stop = _declaration_end(masked, end + 1)
        declaration = masked[match.end():end]
        head = declaration.split("=", 1)[0]
        before = masked[:match.start()].rstrip()
        pieces.append(text[position:match.start()])
        if stop != ";" or re.search(r"[*&]", _strip_nested(head)):
            pieces.append(" " * len(keyword))  # parameter, pointer or reference: a plain local
            position = match.end()
        elif re.search(r"\bextern$", before):
            pieces.append(keyword)  # dynamic shared memory, see rewrite_extern_shared
            position = match.end()
        else:
            prefix = "" if re.search(r"\bstatic$", before) else "static"
            pieces.append(prefix + text[match.end():end + 1] + _registrations(declaration, counter))
            counter += 1
            position = end + 1
    pieces.append(text[position:])
    return "".join(pieces)


def _is_parameter(masked: str, index: int) -> bool:
    """True when ``index`` lies inside parentheses (a function parameter list)."""
    depth = 0
    for ch in reversed(masked[:index]):
        if ch in ")]}":
            depth += 1
        elif ch in "([{":
            if depth == 0:
                return ch == "("
            depth -= 1
        elif ch == ";" and depth == 0:
            return False
    return False


def _registrations(declaration: str, counter: int) -> str:
    """`static bool` initialisers registering each declared variable for poisoning."""
    declaration = re.sub(r"__align__\s*\([^()]*\)|alignas\s*\([^()]*\)", "", declaration)
    out = []
    for index, part in enumerate(_split_top(declaration)):
        target = part.split("=", 1)[0]
        target = re.sub(r"\[.*", "", target, flags=re.S).strip()
        name = re.search(r"(\w+)\s*$", target)
        if name:
            out.append(f" static bool kir_tg_{counter}_{index} = ::kir_emu::register_tg("
                       f"(void*)&{name.group(1)}, sizeof({name.group(1)}));")
    return "".join(out)


_EXTERN_SHARED = re.compile(
    r"extern\s+__shared__\s+(?P<type>(?:[\w:<>,\s*]|__align__\s*\([^()]*\))+?)\s*"
    r"(?P<name>\w+)\s*\[\s*\]\s*(?:__align__\s*\([^()]*\)\s*)?;")


def rewrite_extern_shared(text: str) -> str:
    """``extern __shared__ T x[];`` -> ``T* x = (T*)dynamic shared memory;`` (same line; T
    may be a pointer type: llm.c's ``extern __shared__ char* params[];``)."""
    masked = mask(text)
    pieces, position = [], 0
    for match in _EXTERN_SHARED.finditer(masked):
        type_text = re.sub(r"__align__\s*\([^()]*\)", "", text[match.start("type"):match.end("type")])
        type_text = " ".join(type_text.split())
        name = match["name"]
        pieces.append(text[position:match.start()])
        pieces.append(f"{type_text}* {name} = reinterpret_cast<{type_text}*>"
                      f"(::kir_emu::cuda::dyn_smem());")
        position = match.end()
    pieces.append(text[position:])
    return "".join(pieces)


def strip_metal_includes(text: str) -> str:
    """Comment out ``#include <metal_*>`` (the shim provides them), and write Metal's half
    literals (``1.5h``, a suffix C++ has not) as conversions of float ones."""
    text = re.sub(r"(?m)^([ \t]*#\s*include\s*<metal_\w+>)", r"// \1", text)
    return _HALF_LITERAL.sub(r"half(\1f)", text)


_HALF_LITERAL = re.compile(r"(?<![\w.])(\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)[hH]\b")


def strip_host_code(text: str, keep_kernel: str | None = None) -> str:
    """Blank out top-level functions that are neither ``__global__`` nor ``__device__``
    (and, with ``keep_kernel``, the ``__global__`` functions of other names)."""
    masked = mask(text, directives=True)
    blank_ranges: list[tuple[int, int]] = []
    head_start, depth, scopes = 0, 0, 0
    index = 0
    while index < len(masked):
        ch = masked[index]
        if ch == "{" and depth == 0:
            head = masked[head_start:index]
            words = " ".join(head.split())
            if re.match(r"^(?:inline\s+)?namespace\b[\w\s:]*$", words) or re.match(r'^extern\s*"?', words) \
                    and not re.search(r"\(", words):
                scopes += 1
                head_start = index + 1
                index += 1
                continue
            if _is_host_function(words) or keep_kernel is not None and \
                    _is_other_kernel(words, keep_kernel):
                close = _matching_brace(masked, index)
                first = head_start + (len(head) - len(head.lstrip()))
                blank_ranges.append((first, close + 1))
                index = close + 1
                head_start = index
                continue
            depth += 1
        elif ch == "{":
            depth += 1
        elif ch == "}":
            if depth == 0 and scopes:
                scopes -= 1
            else:
                depth -= 1
            if depth == 0:
                head_start = index + 1
        elif ch == ";" and depth == 0:
            words = " ".join(masked[head_start:index].split())
            if _is_function_instantiation(words) or keep_kernel is not None and \
                    _is_other_kernel_instantiation(words, keep_kernel):  # blanked above
                first = head_start + (len(masked[head_start:index]) -
                                      len(masked[head_start:index].lstrip()))
                blank_ranges.append((first, index + 1))
            head_start = index + 1
        index += 1
    chars = list(text)
    for first, last in blank_ranges:
        for k in range(first, min(last, len(chars))):
            if chars[k] != "\n":
                chars[k] = " "
    return "".join(chars)


_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)")


def _is_other_kernel(head: str, keep: str) -> bool:
    """A ``__global__`` function definition whose name is not ``keep``."""
    if "(" not in head or not re.search(r"\b__global__\b", head):
        return False
    if head.startswith("template"):  # its parameters may hold parentheses: T (*F)(const T&)
        head = head[template_header_length(head):]
    # the name follows __global__ (a launch-bounds macro before it has parentheses too:
    # C10_LAUNCH_BOUNDS_1(1024) __global__ void k(...))
    head = head[head.find("__global__") + len("__global__"):]
    signature = _LAUNCH_BOUNDS.sub(" ", head).split("(", 1)[0]
    names = re.findall(r"[A-Za-z_]\w*", signature)
    return bool(names) and names[-1] != keep


def _is_other_kernel_instantiation(statement: str, keep: str) -> bool:
    """``template __global__ void scale<float>(float*, int);``: an explicit instantiation of
    a ``__global__`` function other than ``keep`` (whose definition is blanked)."""
    if not re.match(r"^(?:extern\s+)?template\s+(?!<)", statement) \
            or not re.search(r"\b__global__\b", statement) or "(" not in statement:
        return False
    signature = statement[statement.find("__global__") + len("__global__"):].split("(", 1)[0]
    names = re.findall(r"[A-Za-z_]\w*", signature.split("<", 1)[0])
    return bool(names) and names[-1] != keep


def _is_function_instantiation(statement: str) -> bool:
    """``template void run<float>(const float*, int);``: an explicit instantiation of a host
    function (the launcher the harness blanks; a kernel's or a device function's names its
    ``__global__``/``__device__``, and the harness instantiates the kernel it launches)."""
    return bool(re.match(r"^(?:extern\s+)?template\s+(?!<)", statement)) and "(" in statement \
        and not re.search(r"\b(__global__|__device__|struct|class)\b", statement)


def _is_host_function(head: str) -> bool:
    if "(" not in head or ")" not in head:
        return False
    if re.search(r"\b(__global__|__device__|constexpr)\b", head):
        return False  # (constexpr functions are device functions under nvcc's relaxed rules)
    before_paren = head.split("(", 1)[0]
    if re.search(r"\b(struct|class|union|enum)\b", before_paren):
        return False
    if "=" in _strip_nested(before_paren):
        return False
    return True


def _matching_brace(masked: str, start: int) -> int:
    depth = 0
    for index in range(start, len(masked)):
        if masked[index] == "{":
            depth += 1
        elif masked[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    return len(masked) - 1
