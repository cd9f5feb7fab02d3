"""Dependence analysis (kir.analysis.deps) on small IR nests and on the FlashAttention example."""

from pathlib import Path

from kir.analysis.affine import may_equal_zero, to_poly
from kir.analysis.deps import (
    all_deps,
    can_interchange,
    dependence_graph,
    independent_iterations,
    loop_carries_dependence,
)
from kir.ir import Binary, Const, Var
from kir.ir.parser import parse_kernel
from kir.ir.types import I32

HEAD = '''kernel @t(x: f32* global const, y: f32* global, n: i32)
    grid=("1", "1", "1") block=(32, 1, 1) shared_bytes=0 {
'''


def kernel(body: str):
    return parse_kernel(HEAD + body + "}\n")


def test_poly_and_banerjee():
    i = Var("i", I32)
    p = to_poly(Binary("+", Binary("*", i, Const(4, I32), I32), Const(3, I32), I32),
                lambda name: {(name,): 1})
    assert p == {("i",): 4, (): 3}
    # 2i - 2i' = 1 has no integer solution (GCD); i - i' = 100 none in [0, 9] (bounds).
    assert not may_equal_zero({("i#1",): 2, ("i#2",): -2, (): -1},
                              [("i#1", "i#2", "*", (0, 9))], {})
    assert not may_equal_zero({("i#1",): 1, ("i#2",): -1, (): -100},
                              [("i#1", "i#2", "*", (0, 9))], {})
    assert may_equal_zero({("i#1",): 1, ("i#2",): -1, (): -1},
                          [("i#1", "i#2", "<", (0, 9))], {}) is False
    assert may_equal_zero({("i#1",): 1, ("i#2",): -1, (): 1},
                          [("i#1", "i#2", "<", (0, 9))], {})


def test_independent_rows_per_thread():
    k = kernel('''  for L0 i: i32 = 0; i < n; i = i + 1 {
    y[i * 32 + i32(thread.x)] = x[i]
  }
''')
    assert loop_carries_dependence(k, "L0", {"n": 64}) is False
    assert independent_iterations(k, "L0", {"n": 64})


def test_recurrence_and_reduction_are_carried():
    k = kernel('''  let acc: f32 = 0.0
  for L0 i: i32 = 1; i < 8; i = i + 1 {
    y[i * 32 + i32(thread.x)] = y[(i - 1) * 32 + i32(thread.x)] * 2.0
  }
  for L1 j: i32 = 0; j < n; j = j + 1 {
    acc = acc + x[j]
  }
  y[i32(thread.x)] = acc
''')
    deps = all_deps(dependence_graph(k, "L0"))
    assert any(d.kind == "flow" and d.what == "y" and d.direction == ("<",) for d in deps)
    assert loop_carries_dependence(k, "L0") is True
    reduction = all_deps(dependence_graph(k, "L1"))
    assert any(d.what == "$acc" and d.kind == "flow" and d.direction == ("<",)
               for d in reduction)


def test_unknown_index_cannot_tell():
    k = kernel('''  for L0 i: i32 = 0; i < n; i = i + 1 {
    y[i32(thread.x) * 64 + i32(x[i])] = 1.0
  }
''')
    assert loop_carries_dependence(k, "L0", {"n": 4}) in (None, True)
    assert not independent_iterations(k, "L0", {"n": 4})


def test_interchange_direction():
    k = kernel('''  for L0 a: i32 = 1; a < 8; a = a + 1 {
    for L1 b: i32 = 0; b < 7; b = b + 1 {
      y[(a * 8 + b) * 32 + i32(thread.x)] = y[((a - 1) * 8 + b + 1) * 32 + i32(thread.x)]
    }
  }
  for L2 c: i32 = 1; c < 8; c = c + 1 {
    for L3 e: i32 = 0; e < 8; e = e + 1 {
      y[(c * 8 + e) * 32 + i32(thread.x)] = y[((c - 1) * 8 + e) * 32 + i32(thread.x)]
    }
  }
''')
    assert not can_interchange(k, "L0", "L1")  # (<, >) dependence
    assert can_interchange(k, "L2", "L3")      # (<, =) only


def test_cross_thread_conflict_is_reported():
    k = kernel('''  for L0 i: i32 = 0; i < 4; i = i + 1 {
    y[i] = 1.0
  }
''')
    deps = all_deps(dependence_graph(k, "L0"))
    assert any(d.cross_thread for d in deps)
    assert not can_interchange(k, "L0", "L0")


def test_flash_attention_loops_can_swap():
    from kir.driver.load import load_kernel
    from kir.driver.rulecheck import context_for

    path = Path(__file__).resolve().parents[1] / "examples" / "flash_attn.cu"
    loaded = load_kernel(path, sizes={"B": 1, "H": 1, "N": 64, "D": 16})
    assume = {k: v for k, v in context_for(loaded).scalars.items() if isinstance(v, int)}
    k = loaded.kernel
    # Without discounting the iteration-private Qi/S tiles the swap looks illegal.
    assert not can_interchange(k, "L0", "L2", assume, within="L2")
    assert can_interchange(k, "L0", "L2", assume, within="L2", kill_covered=True)
    assert loop_carries_dependence(k, "L0", assume) is True


def test_thread_private_accesses_on_the_flash_attention_example():
    """The example keeps four arrays in one shared buffer: each thread's query row (Qi) and
    score row (S) are its own, the key and value tiles (Kj, Vj) are loaded by every thread
    and read by all. Only the own rows' accesses are private, and only with the sizes known
    (the row length d is a parameter)."""
    from kir.analysis.deps import thread_private_accesses
    from kir.driver.load import load_kernel
    from kir.ir import Load, Store
    from kir.ir.printer import print_expr

    loaded = load_kernel(Path(__file__).parents[1] / "examples" / "flash_attn.cu")
    k = loaded.kernel
    assume = {"N": 256, "d": 64, "Tc": 8, "Tr": 8, "Bc": 32, "Br": 32}
    private = thread_private_accesses(k, assume)
    accesses = [n for n in k.body.walk() if isinstance(n, (Load, Store)) and n.buffer == "sram"]
    chosen = {print_expr(n.index) for n in accesses if id(n) in private}
    others = {print_expr(n.index) for n in accesses if id(n) not in private}
    assert {i.split(" ")[0] for i in chosen} == {"Qi", "S"}, chosen
    assert {i.split(" ")[0] for i in others} == {"Kj", "Vj"}, others
    assert "Qi + (tx * d + x_2)" in chosen and "Kj + (y * d + x_2)" in others
    assert thread_private_accesses(k, {}) == frozenset()  # d unknown: no claim
