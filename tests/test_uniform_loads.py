"""The barrier check reads a flag one thread left in shared memory before a barrier as the
same in every thread (kir.ir.uniform_loads), and only then."""

from __future__ import annotations

import pytest

from kir.errors import KirError
from kir.ir.parser import parse_kernel
from kir.ir.verify import verify

HEAD = '''kernel @k(x: f32* global const, out: f32* global)
    grid=("4", "1", "1") block=(64, 1, 1) shared_bytes=0 {
  shared flag: i32[1]
  shared acc: f32[64]
'''
DECIDE = '''  if i32(thread.x) == 0 {
    flag[0] = i32(x[i32(block.x)] > 0.0)
  }
  barrier block
'''
USE = '''  if flag[0] != 0 {
    acc[i32(thread.x)] = x[i32(thread.x)]
    barrier block
    out[i32(block.x) * 64 + i32(thread.x)] = acc[63 - i32(thread.x)]
  }
'''


def _verify(body: str) -> None:
    verify(parse_kernel(HEAD + body + "}\n"))


def test_a_flag_written_before_the_barrier_is_uniform_after_it():
    _verify(DECIDE + USE)
    _verify(DECIDE + "  let f: i32 = flag[0]\n" + USE.replace("flag[0] != 0", "f != 0"))
    # In a loop, once a barrier ends each round (no thread decides again while a slow one
    # still reads the last round's flag).
    _verify("  for L0 r: i32 = 0; r < 3; r = r + 1 {\n" + DECIDE + USE + "  barrier block\n  }\n")


@pytest.mark.parametrize("body, why", [
    (USE, "nothing orders the write"),  # read before anyone wrote it: no barrier before
    (DECIDE + '''  let f: i32 = flag[0]
  if i32(thread.x) == 0 {
    flag[0] = 0
  }
''' + USE.replace("flag[0] != 0", "f != 0"), "a thread resets it before the next barrier"),
    (DECIDE + '''  if i32(thread.x) == 1 {
    flag[0] = 1
  }
''' + USE, "a store on one path since the barrier"),
    ("  for L0 r: i32 = 0; r < 3; r = r + 1 {\n" + DECIDE + USE + "  }\n",
     "a round's decision meets the last round's read when the flag was 0"),
])
def test_a_flag_some_thread_may_still_write_is_not(body, why):
    with pytest.raises(KirError, match="barrier under thread-divergent control flow"):
        _verify(body)


def test_one_load_object_in_two_places_is_judged_in_both():
    """Rules share unchanged subtrees: the same Load may stand after the barrier (uniform)
    and again before anyone wrote the flag. Uniform in one place is not enough."""
    import dataclasses

    from kir.ir import Barrier, Block, If

    kernel = parse_kernel(HEAD + DECIDE + USE + "}\n")
    verify(kernel)
    use = next(s for s in kernel.body.stmts if isinstance(s, If) and "flag" in str(s.cond))
    early = If(use.cond, Block((Barrier("block"),)))  # the same Load object, read first
    body = Block((kernel.body.stmts[0], kernel.body.stmts[1], early) + kernel.body.stmts[2:])
    with pytest.raises(KirError, match="barrier under thread-divergent control flow"):
        verify(dataclasses.replace(kernel, body=body))
