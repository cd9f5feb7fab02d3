"""The parallel-scan rule and the builder of its scan networks."""
