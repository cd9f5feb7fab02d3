"""Fuzzers: frontend, spec and IR-text parsers, rule soundness (see docs/RELIABILITY.md)."""
