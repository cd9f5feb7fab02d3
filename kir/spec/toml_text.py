"""Write spec data as TOML text: what ``kir spec init`` drafts and what a spec given to the
Python API as a dict becomes (so its errors point at a line like a file's do).

Only what specs hold: strings, integers, floats (``inf``, ``nan``), booleans, lists of those,
tables of those written inline, and tables of tables written as ``[name]`` sections with one
inline table per key (the ``[args]`` layout of every example spec). ``comments`` puts a
``# ...`` after a key's line, e.g. ``{("args", "y"): "TODO: check"}``.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def key_text(key: str) -> str:
    """A TOML key: bare when it can be, quoted otherwise."""
    return key if key and set(key) <= _BARE else json.dumps(key)


def value_text(value: Any) -> str:
    """One TOML value (inline tables for mappings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{key_text(str(k))} = {value_text(v)}"
                                for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML: {value!r}")


def dumps(data: Mapping[str, Any], comments: Mapping[tuple[str, ...], str] | None = None,
          header: str = "") -> str:
    """``data`` as TOML text: plain keys first, then one section per table of tables.
    ``header`` lines (without ``#``) open the text as comments."""
    comments = comments or {}
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]

    def line(keys: tuple[str, ...], text: str) -> None:
        note = comments.get(keys)
        lines.append(f"{text}  # {note}" if note else text)

    sections = []
    for key, value in data.items():
        if isinstance(value, Mapping) and value and all(isinstance(v, Mapping)
                                                        for v in value.values()):
            sections.append((key, value))
        else:
            line((key,), f"{key_text(key)} = {value_text(value)}")
    for key, table in sections:
        lines += ["", f"[{key_text(key)}]"]
        note = comments.get((key,))
        if note:
            lines[-1] += f"  # {note}"
        for name, value in table.items():
            line((key, name), f"{key_text(name)} = {value_text(value)}")
    return "\n".join(lines) + "\n"
