"""Float atomic max / min built from integer atomics on the value's bits, read as the float
atomic they implement.

Quantization kernels of inference engines take a tensor's absolute maximum with a helper
like::

    __device__ float atomicMaxFloat(float* addr, float value) {
      float old;
      old = (value >= 0) ? __int_as_float(atomicMax((int*)addr, __float_as_int(value)))
                         : __uint_as_float(atomicMin((unsigned int*)addr, __float_as_uint(value)));
      return old;
    }

Non-negative floats order as their bits do as signed ints, negative floats in reverse as
unsigned ints, and every negative float's unsigned bits lie above every non-negative
float's: so the pair is a float max (and with atomicMin and atomicMax swapped, a float
min). kir's IR has float atomic max and min (each target emits it its own best way), so
a helper whose whole body is this pair, as a ternary or an if/else, is read as that atomic:
:func:`sign_split` recognizes it from the function's text (tokens, so layout and comments do
not matter), the same way :mod:`kir.frontends.cuda.cas_loops` reads compare-and-swap loops.
"""

from __future__ import annotations

import re

from kir.frontends.cuda.cas_loops import CasLoop, body_and_params

_NAME = r"[A-Za-z_]\w*"
# a non-negative test of the value: v >= 0 (0.f, 0.0f, 0.0), !signbit(v), 0 <= v (as tokens)
_COND = r"(?:{v} > = 0(?:\.0*)?f?|0(?:\.0*)?f? < = {v}|! signbit \( {v} \))"
_INT = r"(?:int|signed int|int32_t)"
_UINT = r"(?:unsigned int|unsigned|uint32_t|uint)"
_ATOMIC = (r"(atomicMax|atomicMin) \( (?:\( {t} \* \) {a}|reinterpret_cast < {t} \* > "
           r"\( {a} \)) , {bits} \( {v} \) \)")
# what is left of a helper once its test is C, its int atomic I and its unsigned one U
_SKELETONS = [
    rf"float {_NAME} ; ({_NAME}) = C \? I : U ; return \1 ;",
    rf"float ({_NAME}) = C \? I : U ; return \1 ;",
    r"return C \? I : U ;",
    r"C \? I : U ;",
    r"if C \{ I ; \} else \{ U ; \}",
    r"if C I ; else U ;",
    r"if C \{ return I ; \} else \{ return U ; \}",
    r"if C return I ; else return U ;",
    r"if C \{ return I ; \} return U ;",
    r"if C return I ; return U ;",
]


def sign_split(text: str) -> CasLoop | None:
    """The float atomic a ``__device__`` function's text builds from integer atomic max and
    min on the value's bits, or None when the text is not such a function."""
    found = body_and_params(text)
    if found is None or "atomicMax" not in found[0] or "atomicMin" not in found[0]:
        return None
    body, params = found
    if len(params) != 2:
        return None
    for address in params:
        value = params[1 - params.index(address)]
        a, v = re.escape(address), re.escape(value)
        signed = re.search(_ATOMIC.format(t=_INT, a=a, bits="__float_as_int", v=v), body)
        unsigned = re.search(_ATOMIC.format(t=_UINT, a=a, bits="__float_as_uint", v=v), body)
        if not signed or not unsigned or signed.group(1) == unsigned.group(1):
            continue
        skeleton = body.replace(signed.group(0), "I").replace(unsigned.group(0), "U")
        skeleton = re.sub(r"__int_as_float \( I \)", "I", skeleton)
        skeleton = re.sub(r"__uint_as_float \( U \)", "U", skeleton)
        skeleton = re.sub(_COND.format(v=v), "C", skeleton)
        while "( C )" in skeleton:
            skeleton = skeleton.replace("( C )", "C")
        if any(re.fullmatch(s, skeleton) for s in _SKELETONS):
            op = "max" if signed.group(1) == "atomicMax" else "min"
            return CasLoop(op, "f32", params.index(address), params.index(value))
    return None
