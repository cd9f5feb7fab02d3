"""Soundness of the whole rule catalog on kir's corpus (tests/corpus): kernels written in
other styles than the examples (``uint`` indices, one-warp blocks, C++ helpers, macros).
Every loaded rule is applied at every site with every parameter value (one parameter at a
time) to every spec'd corpus kernel at its spec's sizes and compared with the original on the
interpreter, as tests/rules/test_catalog_soundness.py does for the examples. It found pad-shared and
transpose-shared rebuilding ``uint`` indices as i32 (the result did not verify) and
resize-block widening a one-warp argmax whose warps nothing combines."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.rulecheck import check_rules_on

CORPUS = Path(__file__).resolve().parent
SPECS = sorted(CORPUS.glob("*.kir.toml"))
REGISTRY = load_registry(plugins=False)


def _source(spec: Path) -> Path:
    return CORPUS / (spec.name.split(".")[0] + ".cu")


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.name.removesuffix(".kir.toml"))
def test_every_rule_keeps_the_corpus_kernel(spec):
    loaded = load_kernel(_source(spec), spec_path=spec)
    # Each parameter's values one at a time (the examples' sweep takes every combination):
    # warp-tile-matmul's 30 combinations a GEMM kernel cost most of this test's time.
    results = check_rules_on(loaded, REGISTRY.values(), REGISTRY, product=False)
    bad = [(str(a.step), a.status, a.detail) for a in results
           if a.status in ("changed", "error")
           and not getattr(REGISTRY[a.step.rule], "precision", None)]
    assert not bad, bad
    assert results, "no rule was even tried"
