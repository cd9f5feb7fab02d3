"""kir's Python API (imported by ``kir`` on first use): :func:`load` a kernel with its spec,
then ``run``, ``search`` and ``module`` it; :class:`SearchSession` is the one search path the
``kir`` command shares with it. Sits above measurement and the report, below the CLI."""

from kir.api.kernel import LoadedKernel, RunResult, SearchResult, load
from kir.api.modules import ModuleBuild, build_module
from kir.api.searching import SearchRequest, SearchSession

__all__ = ["LoadedKernel", "ModuleBuild", "RunResult", "SearchRequest", "SearchResult",
           "SearchSession", "build_module", "load"]
