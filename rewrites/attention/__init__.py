"""Rules that rebuild an attention nest's GPU structure (mma-attention)."""
