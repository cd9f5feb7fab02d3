"""kir from Python: load a kernel with its spec, run it, search it, get a module.

    import kir
    k = kir.load("softmax.cu")                       # spec beside it, or spec=path/TOML/dict
    print(k.run().ok)                                # the interpreter against the reference
    result = k.search(target="model", budget=20)     # the same search as the CLI's
    softmax = result.module()                        # the MLX function, in memory
    result.write("softmax_kir.py")                   # the module as a file

Everything here goes through the same code as the ``kir`` command (the driver, the search
session of :mod:`kir.api.searching`, the writers of :mod:`kir.api.results`).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from kir.api.searching import SearchRequest, Searched, SearchSession
from kir.driver.load import Loaded, load_kernel
from kir.errors import KirError
from kir.spec import Spec, load_spec_text, spec_from_data


def _spec(path: Path, spec: Any) -> Spec | str | None:
    """A spec argument as the loader takes it: None (beside the kernel), a path, TOML text
    (anything with a newline or an ``=``), a dict, or a loaded Spec."""
    if spec is None or isinstance(spec, (Spec, Path)):
        return spec
    virtual = path.with_name(path.name.split(".")[0] + ".kir.toml")  # refs.py resolve beside
    if isinstance(spec, dict):
        return spec_from_data(spec, virtual)
    if isinstance(spec, str):
        if "\n" in spec or "=" in spec:
            return load_spec_text(spec, virtual)
        return spec
    raise KirError(f"spec must be a path, TOML text or a dict, got {type(spec).__name__}")


def load(path: str | Path, spec: Any = None, *, kernel: str | None = None,
         sizes: Mapping[str, int] | None = None) -> "LoadedKernel":
    """Load a CUDA (``.cu``) or kir IR (``.kir``) kernel with its spec; ``sizes`` override
    the spec's defaults, ``kernel`` picks one ``__global__`` function of several."""
    path = Path(path)
    loaded = load_kernel(path, spec_path=_spec(path, spec), sizes=dict(sizes or {}),
                         kernel_name=kernel)
    return LoadedKernel(loaded)


@dataclasses.dataclass(frozen=True)
class RunResult:
    """One run compared with the reference: ``ok``, the worst error, the outputs (numpy)
    and the reference's."""

    ok: bool
    max_abs_err: float
    outputs: dict
    expected: dict
    reference: str
    description: str

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return self.description


class LoadedKernel:
    """A kernel with its spec bound to sizes. See the module docstring."""

    def __init__(self, loaded: Loaded) -> None:
        self.loaded = loaded

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"<kir kernel {self.name} from {self.loaded.path.name} ({sizes})>"

    @property
    def name(self) -> str:
        return self.loaded.kernel.name

    @property
    def ir(self):
        """The kernel as kir IR (:class:`kir.ir.Kernel`; ``str()`` of it prints the text)."""
        return self.loaded.kernel

    @property
    def spec(self) -> Spec | None:
        return self.loaded.spec

    @property
    def sizes(self) -> dict[str, int]:
        return dict(self.loaded.bound.sizes) if self.loaded.bound else {}

    def with_sizes(self, **sizes: int) -> "LoadedKernel":
        """The same kernel and spec at other sizes."""
        return LoadedKernel(load_kernel(self.loaded.path, spec_path=self.loaded.spec,
                                        sizes={**self.sizes, **sizes},
                                        kernel_name=self.name))

    def ir_text(self) -> str:
        from kir.ir.printer import print_kernel

        return print_kernel(self.loaded.kernel)

    def run(self, target: str = "interp", *, seed: int = 0) -> RunResult:
        """Run on random inputs from the spec on ``target`` (``interp``, ``emulate-metal``,
        ``emulate-cuda``, ``emulate-original``, ``mlx``) and compare with the reference,
        after the same verification ``kir run`` does."""
        from kir.backends import TARGETS
        from kir.driver.runners import check_on_target
        from kir.ir.verify import verify

        self._need_spec("run")
        verify(self.loaded.kernel, TARGETS["metal" if "metal" in target or target in
                                           ("interp", "mlx") else "cuda"])
        outcome = check_on_target(self.loaded, target, seed=seed)
        return RunResult(outcome.result.ok, outcome.result.max_abs_err, outcome.outputs,
                         outcome.reference, outcome.reference_name,
                         outcome.result.describe())

    def emit(self, target: str = "metal"):
        """The :class:`kir.backends.Emitted` kernel for ``target`` (``"metal"``/``"cuda"``)."""
        from kir.backends import emit

        self._need_spec("emit")
        return emit(self.loaded.kernel, self.loaded.bound, target)

    def module_build(self, target: str = "metal", *, dtypes: Sequence[str] | None = None,
                     **options: Any):
        """The drop-in module of the unrewritten kernel (:class:`kir.api.ModuleBuild`);
        ``dtypes`` limits the dtypes of a ``typename T`` kernel (default f32, f16, bf16),
        ``options`` are :class:`kir.backends.module.ModuleOptions` (``warmup_on_import``)."""
        from kir.api.modules import build_module
        from kir.backends.module import ModuleOptions

        self._need_spec("module")
        return build_module(self.loaded, target=target, dtypes=dtypes,
                            options=ModuleOptions(**options))

    def module(self, target: str = "metal", *, dtypes: Sequence[str] | None = None,
               **options: Any):
        """The unrewritten kernel as the generated MLX function, in memory."""
        build = self.module_build(target, dtypes=dtypes, **options)
        return getattr(build.load(), _function(build))

    def search(self, target: str | None = None, budget: int | None = None, *,
               time: str | float | None = None, strategy: str | None = None, seed: int = 0,
               check_sizes: Mapping[str, int] | None = None, db: str | Path | None | bool = None,
               rules: Sequence[str | Path] = (), quiet: bool = True,
               cluster: str | None = None,
               device_resource: str | None = None) -> "SearchResult":
        """Search rewrites for the fastest valid kernel on ``target`` ("metal", "cuda",
        "model"; default this machine's GPU, else the model) within ``budget`` evaluations
        and/or ``time`` ("5m" or seconds) with ``strategy`` (None: the target's
        :func:`~kir.api.searching.default_strategy`). ``db``: the tuning database (a path;
        None for the default one, False for none). ``quiet`` False prints what the CLI would
        on stderr. ``cluster`` ("ray" or "ray:ADDRESS") judges candidates on a Ray cluster's
        workers, the device workers on nodes offering ``device_resource``
        (docs/SCALE_OUT.md)."""
        request = SearchRequest(target, budget, time, strategy, seed, check_sizes, db,
                                tuple(rules), cluster, device_resource)
        say = (lambda line: None) if quiet else (lambda line: print(line, file=sys.stderr))
        session = SearchSession(self.loaded, request, note=say)
        return SearchResult(session.run())

    def _need_spec(self, what: str) -> None:
        if self.loaded.bound is None:
            raise KirError(f"{self.loaded.path} has no spec: {what} needs its sizes and "
                           "arguments", hint="pass spec=... to kir.load, or write a .kir.toml "
                                             "beside the kernel (kir spec init drafts one)")


def _function(build) -> str:
    first = build.variants[0].emitted
    from kir.backends.module import python_name

    return python_name(first.kernel_name or first.name)


class SearchResult:
    """A finished search: the winner and its times, ``module()`` (the MLX function, in
    memory), ``write(path)`` (the module file) and ``save(folder)`` (everything the CLI
    writes: module, trace, IR, report)."""

    def __init__(self, searched: Searched) -> None:
        self.searched = searched
        self._build = None

    def __repr__(self) -> str:
        best = f"{self.best_ms:.4g} ms" if self.best_ms is not None else "no valid kernel"
        return (f"<kir search of {self.searched.loaded.kernel.name}: {best}{self.unit}, "
                f"{len(self.steps)} steps, {self.evaluations} evaluations>")

    @property
    def result(self):
        """The search engine's own :class:`kir.search.SearchResult`."""
        return self.searched.result

    best_ms = property(lambda self: self.result.best_ms)
    baseline_ms = property(lambda self: self.result.baseline_ms)
    speedup = property(lambda self: self.result.speedup)
    modelled = property(lambda self: self.result.modelled)
    kernel = property(lambda self: self.result.best_kernel, doc="the winner as kir IR")
    unit = property(lambda self: self.searched.unit)
    target = property(lambda self: self.searched.target)
    phases = property(lambda self: self.result.phases,
                      doc="where the search's seconds went (kir.search.phases.Phases)")

    @property
    def steps(self) -> list[str]:
        """The winning rule steps (replayable with ``kir apply --step``)."""
        return [str(s) for s in self.result.best_steps]

    @property
    def evaluations(self) -> int:
        return len(self.result.history)

    @property
    def ok(self) -> bool:
        """Whether the unrewritten kernel passed its own check (else nothing was searched)."""
        return not self.searched.baseline_failed

    def module_build(self, *, dtypes: Sequence[str] | None = None, **options: Any):
        """The module's text and variants (:class:`kir.api.ModuleBuild`); ``dtypes`` and
        ``options`` as for :meth:`LoadedKernel.module_build`."""
        from kir.api.results import build_searched_module
        from kir.backends.module import ModuleOptions

        self._check()
        if options or dtypes or self._build is None:
            build = build_searched_module(self.searched, dtypes=dtypes,
                                          options=ModuleOptions(**options))
            if options or dtypes:
                return build
            self._build = build
        return self._build

    def module(self, *, dtypes: Sequence[str] | None = None, **options: Any):
        """The winner as the generated MLX function, in memory: call it with mx.arrays
        (``@fn.vjp`` attaches a gradient); its module (``warmup()``, ``choose()``,
        ``VARIANTS``) is :meth:`module_build` ``().load()``."""
        build = self.module_build(dtypes=dtypes, **options)
        return getattr(build.load(), _function(build))

    def write(self, path: str | Path, *, dtypes: Sequence[str] | None = None,
              **options: Any) -> Path:
        """Write the module to ``path`` (``x_kir.py``)."""
        return self.module_build(dtypes=dtypes, **options).write(path)

    def save(self, out_dir: str | Path | None = None, *, report: str | Path | None = None):
        """Write module, trace, IR and report as ``kir compile --search`` does (default
        folder ``kir-out/<stem>/<kernel>/``); returns the files written by role."""
        from kir.api.results import output_paths, write_outputs

        self._check()
        written = write_outputs(self.searched, output_paths(self.searched.loaded, out_dir,
                                                            None, report))
        if written.module_error:
            raise KirError(f"the module was not written: {written.module_error}")
        return dict(written.files)

    def _check(self) -> None:
        if self.searched.baseline_failed:
            raise KirError("the unrewritten kernel fails its own check: nothing was searched",
                           hint="fix the kernel or its spec, then check with k.run()")
