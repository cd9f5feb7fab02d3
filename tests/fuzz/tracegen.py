"""Trace fuzzing: inputs and the oracle for ``--trace`` files replayed on the example kernels.

Each input is numbered by a seed (:func:`trace_input`): a trace of steps drawn from what the
catalog offers on the kernel (so most replay, some only in part), with mutations of those
step strings (unknown rules, sites and values, broken braces, duplicated keys), long
repetitions of one step (an unrolling that doubles the IR each time), and files that are not
traces (other JSON shapes, nesting past Python's limits, binary bytes, a byte order mark).

:func:`trace_outcome` is the oracle, as ``kir apply --trace`` works: reading the trace gives
steps or a :class:`KirError` located in the trace file; replaying them (leniently, and
strictly) gives a kernel or a KirError; the kernel verifies or gives a KirError, and prints
and parses back to itself. Anything else raises :class:`~fuzz.cudagen.FuzzFailure`.
"""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path

from fuzz.cudagen import EXAMPLES, FuzzFailure

from kir.errors import KirError

# Small kernels at small sizes: a replay must take milliseconds, not seconds.
KERNELS = {"reduce": {}, "softmax": {"rows": 4, "cols": 64}, "sgemm": {},
           "layernorm": {"rows": 4, "cols": 64}, "selective_scan": {}}
# Rules whose one application on these kernels takes seconds: left out of drawn steps, as a
# search's budget would spend them (they are still named, so unknown-site paths run).
SLOW = {"promote-to-registers"}


@functools.lru_cache(maxsize=None)
def setting(name: str):
    """(loaded kernel, registry, rule context, every single step on it as text)."""
    from kir.backends import TARGETS
    from kir.driver.load import load_kernel
    from kir.driver.registry import load_registry
    from kir.rules import context_for
    from kir.search.genome import all_steps

    loaded = load_kernel(EXAMPLES / f"{name}.cu", sizes=KERNELS[name])
    registry = load_registry(plugins=False)
    ctx = context_for(loaded, TARGETS["metal"])
    steps = [str(s) for s in all_steps(loaded.kernel, registry) if s.rule not in SLOW]
    return loaded, registry, ctx, tuple(steps)


_JUNK = ["{", "}", ",", "=", "loop=", "factor=3", "factor=-1", "factor=99999999999999999999",
         "at=all", "L999", "nope", "\u00e9", "\x00", " ", "{{", "tile-loop", "x" * 300,
         "loop=L1,loop=L2", "factor=8,factor=4", "width=4"]


def _mutate_step(rng: random.Random, step: str, names: list[str]) -> str:
    choice = rng.randrange(6)
    if choice == 0:  # another rule's name with this one's parameters
        return rng.choice(names) + step[step.find("{"):] if "{" in step else step
    if choice == 1:
        return step.replace("L", rng.choice(["L9", "", "Lx", "L-1"]), 1)
    if choice == 2:
        at = rng.randrange(len(step) + 1)
        return step[:at] + rng.choice(_JUNK) + step[at:]
    if choice == 3:
        at = rng.randrange(len(step) + 1)
        return step[:at] + step[at + rng.randint(1, 5):]
    if choice == 4:
        return step.rstrip("}") + "," + rng.choice(_JUNK) + "}"
    return step.upper() if rng.random() < 0.5 else step * 2


def trace_input(seed: int) -> tuple[str, bytes]:
    """The example kernel's name and the trace file's bytes for ``seed``."""
    rng = random.Random(seed)
    name = rng.choice(sorted(KERNELS))
    _, registry, _, steps = setting(name)
    kind = rng.random()
    if kind < 0.05:  # not JSON, or not text
        data = rng.choice([b"\x80\x81\xff", b"{", b"[" * 5000, b"", b"\x00" * 10,
                           b"steps: [a]", "[\"\u00e9\"".encode()])
        return name, data
    if kind < 0.12:  # JSON, but not a trace
        value = rng.choice([5, None, "tile-loop{loop=L0}", {"steps": 5}, {"steps": [1, 2]},
                            {"step": []}, [[["x"]]], {"steps": [None]}, 1e999, [True]])
        return name, json.dumps(value).encode()
    if kind < 0.14:  # nested past the parser's recursion limit
        depth = rng.choice([1000, 100_000])
        return name, ("[" * depth + "]" * depth).encode()
    count = rng.choice([0, 1, 1, 2, 2, 3, 4, 6])
    chosen = [rng.choice(steps) for _ in range(count)] if steps else []
    if kind < 0.18 and steps:  # one step many times: an unrolling doubles the IR each time
        chosen = [rng.choice([s for s in steps if s.startswith("unroll-loop")] or steps)] \
            * rng.randint(10, 40)
    names = sorted(registry)
    chosen = [_mutate_step(rng, s, names) if rng.random() < 0.3 else s for s in chosen]
    wrapper = {"steps": chosen, "kernel": name} if rng.random() < 0.8 else chosen
    data = json.dumps(wrapper, indent=rng.choice([None, 2])).encode()
    if rng.random() < 0.05:
        data = b"\xef\xbb\xbf" + data
    return name, data


def trace_outcome(name: str, data: bytes, folder: Path) -> str:
    """"kernel" (replayed, verified, round-tripped), "refused" (a step did not apply
    strictly), "error" (a KirError); raises FuzzFailure for anything else."""
    path = folder / "fuzz.trace.json"
    path.write_bytes(data)
    try:
        return _replay(name, path)
    except FuzzFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - what the fuzzer hunts
        raise FuzzFailure(f"{type(exc).__name__}: {exc}", data.decode("utf-8", "replace")) \
            from exc


def _replay(name: str, path: Path) -> str:
    from kir.ir.parser import parse_kernel
    from kir.ir.printer import print_kernel
    from kir.ir.verify import verify
    from kir.rules import apply_trace, load_trace

    loaded, registry, ctx, _ = setting(name)
    try:
        steps = load_trace(path, registry)
    except KirError as exc:
        if exc.loc is None and "is a folder" not in exc.message:
            if not exc.message.startswith("no such trace"):
                raise FuzzFailure(f"trace error without a location: {exc}",
                                  path.read_text("utf-8", "replace")) from exc
        elif exc.loc is not None and exc.loc.file != str(path):
            raise FuzzFailure(f"trace error located elsewhere: {exc}",
                              path.read_text("utf-8", "replace")) from exc
        return "error"
    try:
        applied = apply_trace(loaded.kernel, steps, registry, ctx)
    except KirError:  # a rule's failure (RuleError), as `kir apply` reports it
        return "error"
    try:
        apply_trace(loaded.kernel, steps, registry, ctx, strict=True)
        outcome = "kernel"
    except KirError:
        outcome = "refused"
    try:
        verify(applied.kernel)
    except KirError:
        return "error"
    text = print_kernel(applied.kernel)
    if parse_kernel(text, "again.kir") != applied.kernel:
        raise FuzzFailure("the replayed kernel does not print and parse back to itself",
                          path.read_text("utf-8", "replace"))
    return outcome
