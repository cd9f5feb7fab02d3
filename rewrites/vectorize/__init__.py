"""Rules that turn scalar accesses into vector ones (vectorize-access, vectorize-strided) and
their lane and alignment analyses."""
