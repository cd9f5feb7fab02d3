"""Rules that build a matmul's GPU structure from a recognised matmul nest (warp-tile-matmul)."""
