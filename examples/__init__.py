"""kir's example kernels, their specs and references, installed with kir as ``kir.examples``
(``kir examples DIR`` copies them; ``kir.examples_dir()`` is their folder)."""
