"""Rules that change how work maps onto threads and blocks (parallelize-loop, merge-threads,
coarsen-threads, widen-threads, distribute-loop, widen-warps, resize-block) and the
block-level dependence facts they share."""
