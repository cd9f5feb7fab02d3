"""One frontend test kernel checked against its numpy reference on every target: the
interpreter, the emulator running kir's CUDA and Metal, and the emulator running the
original file (what a real C++ compiler makes of it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kir.backends.emulate import emulator_available

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target

TARGETS = ["interp", "emulate-cuda", "emulate-metal", "emulate-original"]


def check_everywhere(path: Path, target: str, sizes: list[dict], seed: int,
                     spec: Path | None = None) -> None:
    """``path``'s kernel at each of ``sizes`` (the spec's own: ``{}``) on ``target``, with
    ``spec`` or the spec beside it."""
    if target != "interp" and not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    for at in sizes:
        outcome = check_on_target(load_kernel(path, spec_path=spec, sizes=at), target,
                                  seed=seed)
        assert outcome.result.ok, (at, outcome.result.describe())


def spec_variant(path: Path, tmp_path: Path, changes: dict[str, str]) -> Path:
    """``path``'s spec with each text in ``changes`` replaced, written to ``tmp_path`` with
    the reference module beside it (the spec names it ``<kernel>_ref``)."""
    spec = path.with_suffix(".kir.toml").read_text()
    for old, new in changes.items():
        assert old in spec, old
        spec = spec.replace(old, new)
    out = tmp_path / f"{path.stem}_variant.kir.toml"
    out.write_text(spec)
    ref = path.parent / f"{path.stem}_ref.py"
    (tmp_path / ref.name).write_text(ref.read_text())
    return out


def assert_call_refused(call: str, message: str, out_type: str = "int") -> None:
    """``out[0] = call;`` in a one-line kernel over ``const float* x`` is refused with
    ``message``, located on that line (2)."""
    from kir.frontends.cuda import load_cuda
    from kir.errors import KirError
    from kir.ir import Launch

    source = f"__global__ void f(const float* x, {out_type}* out) {{\n    out[0] = {call};\n}}\n"
    with pytest.raises(KirError, match=message) as info:
        load_cuda(source, "f.cu", launch=Launch(("1", "1", "1"), (32, 1, 1), 0))
    assert info.value.loc.line == 2
