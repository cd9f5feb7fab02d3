"""The module's own test, as mlx-lm writes them (unittest, skipped without Metal)."""

import unittest

import mlx.core as mx
from decay_scan import decay_scan_kernel, decay_scan_ops


class TestDecayScan(unittest.TestCase):
    @unittest.skipIf(not mx.metal.is_available(), "Metal is not available")
    def test_kernel_matches_ops(self):
        B, T, Dk = 2, 5, 64
        key = mx.random.key(0)
        kq, kk, kv, kg, ks = mx.random.split(key, 5)
        q = mx.random.normal((B, T, Dk), key=kq)
        k = mx.random.normal((B, T, Dk), key=kk)
        v = mx.random.normal((B, T), key=kv)
        g = mx.random.uniform(shape=(B, T), key=kg)
        state = mx.random.normal((B, Dk), key=ks)
        y, new_state = decay_scan_kernel(q, k, v, g, state)
        y_ref, state_ref = decay_scan_ops(q, k, v, g, state)
        self.assertTrue(mx.allclose(y, y_ref, rtol=1e-4, atol=1e-4).item())
        self.assertTrue(mx.allclose(new_state, state_ref, rtol=1e-4, atol=1e-4).item())


if __name__ == "__main__":
    unittest.main()
