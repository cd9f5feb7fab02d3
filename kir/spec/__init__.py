"""The kernel spec: the TOML schema and its checks (:mod:`kir.spec.schema`), a spec bound to
sizes (:mod:`kir.spec.bound`), size expressions, output comparison, and the size checks made
before anything runs. Imports only :mod:`kir.ir`."""

from kir.spec.bound import DEFAULT_TOLERANCES, BoundSpec  # noqa: F401
from kir.spec.schema import (  # noqa: F401
    ARG_KEYS,
    LAUNCH_KEYS,
    ROLES,
    TOP_KEYS,
    ArgSpec,
    Spec,
    dtype_of,
    find_spec,
    load_spec,
    load_spec_text,
    spec_from_data,
)

__all__ = ["ARG_KEYS", "DEFAULT_TOLERANCES", "LAUNCH_KEYS", "ROLES", "TOP_KEYS", "ArgSpec",
           "BoundSpec", "Spec", "dtype_of", "find_spec", "load_spec",
           "load_spec_text", "spec_from_data"]
