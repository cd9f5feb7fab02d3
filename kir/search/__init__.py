"""kir's search: genomes of rule steps, strategies that evolve them, the evaluator protocol
the search judges candidates through, and the tuning database that remembers every result.

The search knows rules only through a registry (``Mapping[str, Rule]``) and targets only
through an :class:`Evaluator`; it never imports a backend, the interpreter, the
measurement package or MLX (tests/test_layers.py checks it).
"""

from kir.search.db import KeyInfo, Row, TuningDB, TuningKey, default_db_path, kir_version
from kir.search.engine import EvalRecord, Progress, SearchConfig, SearchResult, search
from kir.search.evaluator import STATUSES, Evaluation, Evaluator, Status
from kir.search.genome import Genome, crossover, mutate, random_genome, random_step

__all__ = [
    "STATUSES", "EvalRecord", "Evaluation", "Evaluator", "Genome", "KeyInfo", "Progress",
    "Row", "SearchConfig", "Status",
    "SearchResult", "TuningDB", "TuningKey", "crossover", "default_db_path", "kir_version",
    "mutate", "random_genome", "random_step", "search",
]
