"""Rules that change the layout of 2-D shared-memory tiles (pad-shared, transpose-shared) and
the tile-index analysis they share."""
