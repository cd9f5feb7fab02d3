"""Build the drop-in MLX module for a kernel (:mod:`kir.backends.module` writes it).

The module holds, most specific first: kernels a rule specialized to the sizes they were
validated at, the winners the tuning database holds for other chips and sizes of the same
kernel and spec, and the general kernel (the searched winner when it is valid at every size,
else the best such candidate, else the unrewritten kernel). For a ``template <typename T>``
kernel each of those comes once per dtype it is validated for on the interpreter. The spec's
``reference_mlx``, checked against its numpy reference, is the fallback.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from kir.backends import emit
from kir.backends.module import (Fallback, ModuleOptions, Variant, default_fixed,
                                 module_source)
from kir.driver.load import Loaded, load_kernel
from kir.errors import KirError
from kir.ir import Kernel
from kir.measure.cases import scalars_used, sizes_baked_in
from kir.spec import Spec
from kir.spec.bound import DEFAULT_TOLERANCES

DTYPE_CHOICES = ("f32", "f16", "bf16")


@dataclass
class ModuleBuild:
    """A module's text and what went into it: the variants, and notes on what was left
    out and why (a dtype that failed validation, a stored winner that no longer replays)."""

    source: str
    variants: list[Variant]
    fallback: Fallback | None
    notes: list[str] = field(default_factory=list)

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.source)
        return path

    def load(self, name: str | None = None):
        """The module imported from its text in memory (not written anywhere)."""
        import types

        module = types.ModuleType(name or f"{self.variants[0].emitted.kernel_name}_kir")
        exec(compile(self.source, f"<kir module {module.__name__}>", "exec"), module.__dict__)
        return module


def is_specialized(kernel: Kernel, base: Kernel) -> bool:
    """Right only at the sizes it was validated at: a rule said so (``Launch.specialized``)
    or it stopped reading a size the unrewritten kernel reads without declaring it does not
    depend on it (``Launch.ignores``): the value is baked in."""
    return sizes_baked_in(kernel, scalars_used(base))


def fixed_sizes(loaded: Loaded) -> tuple[str, ...]:
    """Sizes the kernel's body bakes in: its template values (a size is a template value
    under its own name unless the spec's ``templates`` says otherwise), block and dynamic
    shared memory."""
    spec = loaded.spec
    names = set(default_fixed(spec))
    if loaded.path.suffix in (".cu", ".cuh"):
        from kir.frontends.cuda import template_params

        try:
            params = template_params(loaded.source, str(loaded.path), loaded.kernel.name)
        except KirError:
            params = []
        names |= {p for p in params if p in spec.sizes and p not in spec.templates}
    return tuple(n for n in spec.sizes if n in names)


def generic_args(loaded: Loaded) -> dict[str, tuple[str, ...]]:
    """``{type parameter: arguments declared with it}`` for a ``template <typename T>``
    kernel (empty for others)."""
    if loaded.path.suffix not in (".cu", ".cuh"):
        return {}
    from kir.frontends.cuda.preprocess import preprocess
    from kir.frontends.cuda.signature import kernel_signature

    try:
        text = preprocess(loaded.source, str(loaded.path), None).text
        signature = kernel_signature(text, loaded.kernel.name)
    except KirError:
        return {}
    return {t: signature.typed_by(t) for t in signature.type_params if signature.typed_by(t)}


def spec_for_dtype(spec: Spec, generic: dict[str, tuple[str, ...]], dtype: str) -> Spec:
    """``spec`` with every generic argument (and template type) set to ``dtype``; its
    tolerances at least the defaults for ``dtype`` (an f32 tolerance would fail an f16
    kernel that is right)."""
    args = dict(spec.args)
    for names in generic.values():
        for name in names:
            if name in args:
                args[name] = dataclasses.replace(args[name], dtype=dtype)
    templates = dict(spec.templates)
    for type_param in generic:
        templates[type_param] = dtype
    rtol, atol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
    return dataclasses.replace(
        spec, args=args, templates=templates,
        rtol=max(rtol, spec.rtol or 0.0), atol=max(atol, spec.atol or 0.0))


def validate(loaded: Loaded, kernel: Kernel, target: str) -> str | None:
    """Why ``kernel`` fails validation at ``loaded``'s sizes (and ragged sizes) on the
    interpreter, or None when it passes."""
    from kir.measure.cases import CheckContext, build_cases, check_kernel

    try:
        cases, _ = build_cases(loaded, seeds=(0,))
    except KirError as exc:
        return exc.message
    verdict = check_kernel(kernel, CheckContext(cases, 2_000_000, None, (),
                                                scalars_used(loaded.kernel), target,
                                                loaded.bound))
    return None if verdict.ok else f"{verdict.status}: {verdict.error}"


def _replay(loaded: Loaded, steps: Sequence, registry, target: str) -> Kernel:
    from kir.backends import target_for
    from kir.rules import apply_trace, context_for

    if not steps:
        return loaded.kernel
    return apply_trace(loaded.kernel, list(steps), registry,
                       context_for(loaded, target_for(target))).kernel


def build_module(loaded: Loaded, *, target: str = "metal", kernel: Kernel | None = None,
                 steps: Sequence = (), registry=None, general: Kernel | None = None,
                 device: str | None = None, time_ms: float | None = None,
                 dtypes: Sequence[str] | None = None, db_path: str | Path | None = None,
                 db_key=None, validate_fallback: bool = True,
                 options: ModuleOptions = ModuleOptions()) -> ModuleBuild:
    """The module for ``loaded`` on ``target`` ("metal" or "cuda").

    ``kernel`` is the searched winner (default: the unrewritten kernel) with the rule
    ``steps`` that made it (replayed for other dtypes; ``registry`` holds the rules);
    ``general`` a kernel valid at every size to stand behind a specialized winner (default:
    the unrewritten one); ``device`` and ``time_ms`` say where and how fast the winner was
    timed. ``dtypes`` lists the dtypes of a ``typename T`` kernel to include (default: every
    one that validates among f32, f16, bf16). ``db_path`` adds the tuning database's
    winners for other chips and sizes (``db_key``: this search's key, already included)."""
    if loaded.bound is None:
        raise KirError(f"{loaded.path} has no spec: a module needs its shapes and launch")
    base = loaded.kernel
    kernel = kernel or base
    notes: list[str] = []
    fixed = fixed_sizes(loaded)
    sizes = dict(loaded.bound.sizes)
    variants: list[Variant] = []
    searched = kernel is not base
    exact = is_specialized(kernel, base)
    label = ("searched winner" if searched else "unrewritten kernel") + \
        (f" on {device}" if device else "") + \
        (f", specialized to {_sizes(sizes)}" if exact else f", tuned at {_sizes(sizes)}"
         if device else "")
    variants.append(Variant(emit(kernel, loaded.bound, target), sizes, fixed, exact,
                            device if searched else None, time_ms, label))
    if exact:
        fallback_kernel = general or base
        variants.append(Variant(emit(fallback_kernel, loaded.bound, target), sizes, fixed,
                                is_specialized(fallback_kernel, base), None, None,
                                "general kernel (valid at every size)"))
    if db_path is not None and registry is not None:
        variants[len(variants) - 1:len(variants) - 1] = _stored_winners(
            loaded, target, registry, Path(db_path), db_key, fixed, notes)
    generic = generic_args(loaded)
    if generic:
        variants += _dtype_variants(loaded, generic, variants, target, steps, registry, dtypes,
                                    notes)
    from kir.api.fallback import check_fallback, fallback_for

    fallback = fallback_for(loaded.spec)
    if fallback is not None and validate_fallback:
        check_fallback(loaded.bound)
    options = dataclasses.replace(options, notes=tuple(options.notes))
    return ModuleBuild(module_source(loaded.bound, variants, fallback=fallback,
                                     options=options), variants, fallback, notes)


def _sizes(sizes) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def _dtype_variants(loaded: Loaded, generic, variants: list[Variant], target: str, steps,
                    registry, dtypes, notes: list[str]) -> list[Variant]:
    """The variants again for each other dtype of a ``typename T`` kernel, each replayed
    and validated on the interpreter at that dtype."""
    have = {a.dtype for name, a in loaded.spec.args.items()
            if any(name in names for names in generic.values())}
    wanted = [d for d in (dtypes or DTYPE_CHOICES) if d not in have]
    out = []
    for dtype in wanted:
        spec = spec_for_dtype(loaded.spec, generic, dtype)
        try:
            typed = load_kernel(loaded.path, spec_path=spec, sizes=dict(loaded.bound.sizes),
                                kernel_name=loaded.kernel.name)
        except KirError as exc:
            notes.append(f"no {dtype} kernel: {exc.message}")
            continue
        for variant in variants:
            if variant.label.startswith("tuned on"):
                continue  # made at other sizes: the stored trace is replayed there only
            kernel = typed.kernel
            if variant.label.startswith("searched") and steps and registry is not None:
                kernel = _replay(typed, steps, registry, target)
            why = validate(typed, kernel, target)
            if why is None:
                try:
                    out.append(dataclasses.replace(
                        variant, emitted=emit(kernel, typed.bound, target),
                        label=f"{variant.label} ({dtype})"))
                    continue
                except KirError as exc:
                    why = exc.message
            notes.append(f"no {dtype} variant of the {variant.label}: {why}")
    return out


def _stored_winners(loaded: Loaded, target: str, registry, db_path: Path, db_key, fixed,
                    notes: list[str]) -> list[Variant]:
    """The tuning database's fastest valid kernel of this kernel and spec for each other
    (device, sizes) on ``target``, replayed at its sizes (the dispatch table)."""
    from kir.api.searching import validation_fingerprint
    from kir.rules import parse_step
    from kir.search import TuningDB

    if not db_path.exists():
        return []
    validation = validation_fingerprint(loaded, registry)
    out = []
    with TuningDB(db_path) as db:
        for info in db.runs():
            key = info.key
            if key.kernel_name != loaded.kernel.name or key.target != target \
                    or key.validation != validation or info.best_ms is None:
                continue
            if db_key is not None and key.identity == db_key.identity:
                continue
            sizes = {k: v for k, v in json.loads(key.sizes).items() if ":" not in k}
            try:
                at = load_kernel(loaded.path, spec_path=loaded.spec, sizes=sizes,
                                 kernel_name=loaded.kernel.name)
                if at.kernel.fingerprint() != key.kernel_fp:
                    continue  # the source changed since
                found = db.best(key)
                steps = [parse_step(text, registry) for text in found[0]]
                kernel = _replay(at, steps, registry, target)
                exact = is_specialized(kernel, at.kernel)
                out.append(Variant(emit(kernel, at.bound, target), dict(at.bound.sizes),
                                   fixed, exact, key.device, found[1],
                                   f"tuned on {key.device} at {_sizes(at.bound.sizes)}"))
            except KirError as exc:
                notes.append(f"tuning database row for {key.device} at {sizes} left out: "
                             f"{exc.message}")
    return out
