"""Measurement, kept out of the search (a builder/runner split): validation cases, the
cost-model and MLX evaluators, and the CPU and GPU worker pools with the timing lock. The
search knows these only through the :class:`kir.search.evaluator.Evaluator` protocol."""
