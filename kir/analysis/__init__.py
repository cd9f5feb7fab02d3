"""Analyses over kir IR that rules share: navigation and names (:mod:`kir.analysis.walk`,
re-exported here), bounds, loops, memory, dependences (affine forms, accesses) and what
varies between threads. Pure functions of the IR; imports only :mod:`kir.ir`."""

from kir.analysis.walk import (  # noqa: F401 - the package's public names
    THREAD_VARYING,
    CanonicalLoop,
    accumulation,
    all_names,
    assigned_vars,
    buffers_read,
    buffers_written,
    canonical,
    constant_trip_count,
    declared_names,
    find_loop,
    fresh_name,
    has_matrix_stmts,
    has_own_exit,
    is_thread_dependent,
    loop_labels,
    loops,
    map_stmts,
    next_loop_label,
    own_exprs,
    rename_var,
    replace_loop,
    replace_stmt,
    single_defs,
    substitute,
    sum_terms,
    thread_dependent_vars,
    used_vars,
)

__all__ = [
    'loops', 'loop_labels', 'find_loop', 'replace_stmt', 'replace_loop', 'declared_names',
    'all_names', 'fresh_name', 'next_loop_label', 'used_vars', 'assigned_vars', 'buffers_read',
    'buffers_written', 'has_matrix_stmts', 'substitute', 'rename_var', 'CanonicalLoop',
    'canonical', 'constant_trip_count', 'THREAD_VARYING', 'thread_dependent_vars',
    'is_thread_dependent', 'map_stmts', 'own_exprs', 'has_own_exit', 'single_defs',
    'accumulation', 'sum_terms',
]
