"""The CUDA preprocessor: macros, conditionals, pragmas, the source map and its errors."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from kir.frontends.cuda import macros
from kir.frontends.cuda.preprocess import MAX_INPUT_CHARS, Preprocessed, preprocess

from kir.errors import KirError, Loc, UnsupportedError


def squash(text: str) -> str:
    """The token text with white space runs collapsed (what a parser sees)."""
    return " ".join(text.split())


def expand(text: str, **defines: str) -> str:
    return squash(preprocess(text, "t.cu", defines or None).text)


def where(source: str, needle: str, nth: int = 0) -> tuple[int, int]:
    """1-based (line, col) of the nth occurrence of ``needle`` in ``source``."""
    offset = [m.start() for m in re.finditer(re.escape(needle), source)][nth]
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1) + 1


def error_of(text: str, cls: type[KirError] = KirError) -> KirError:
    with pytest.raises(cls) as info:
        preprocess(text, "t.cu")
    return info.value


# ---- macros ---------------------------------------------------------------------------------

def test_object_like_macro() -> None:
    assert expand("#define N 128\nint a[N];") == "int a[128];"


def test_function_like_macro_and_nesting() -> None:
    src = "#define MUL(a, b) ((a) * (b))\n#define SQ(x) MUL(x, x)\nint y = SQ(MUL(2, 3));"
    assert expand(src) == "int y = ((((2) * (3))) * (((2) * (3))));"


def test_macro_using_later_defined_macro() -> None:
    assert expand("#define A B + 1\n#define B 41\nint x = A;") == "int x = 41 + 1;"


def test_function_like_name_without_parens_is_not_expanded() -> None:
    assert expand("#define f(x) (x+1)\nint f; int g = f(2);") == "int f; int g = (2+1);"


def test_undef() -> None:
    assert expand("#define N 1\nint a = N;\n#undef N\nint b = N;") == "int a = 1; int b = N;"


def test_self_reference_expands_once() -> None:
    assert expand("#define x (x + 1)\nint y = x;") == "int y = (x + 1);"
    assert expand("#define f(a) a + f(a)\nint y = f(2);") == "int y = 2 + f(2);"
    # mutual recursion stops too
    assert expand("#define A B\n#define B A\nint y = A;") == "int y = A;"


def test_no_expansion_inside_string_and_char_literals() -> None:
    src = '#define N 4\nconst char* s = "N // N"; char c = \'N\'; int k = N;'
    assert expand(src) == 'const char* s = "N // N"; char c = \'N\'; int k = 4;'


def test_token_pasting_and_stringize() -> None:
    src = "#define CAT(a, b) a ## b\n#define STR(x) #x\nint CAT(foo, 2) = 1; s = STR(a + b);"
    assert expand(src) == 'int foo2 = 1; s = "a + b";'
    # an argument next to ## is not expanded first; an empty one is a placemarker
    assert expand("#define N 3\n#define CAT(a, b) a ## b\nint x = CAT(N, 1) + CAT(, y);") \
        == "int x = N1 + y;"
    # the pasted result is rescanned
    assert expand("#define N 3\n#define CAT(a, b) a ## b\nint x = CAT(N, );") == "int x = 3;"


def test_macro_arguments_span_lines_and_nest_parens() -> None:
    src = "#define ADD(a, b) ((a) + (b))\nint x = ADD(f(1, 2),\n          3);\nint z;"
    pp = preprocess(src, "t.cu")
    assert squash(pp.text) == "int x = ((f(1, 2)) + (3)); int z;"
    assert pp.text.splitlines()[3] == "int z;"  # padding keeps later lines on their line


def test_variadic_macro() -> None:
    assert expand("#define CALL(f, ...) f(__VA_ARGS__)\nCALL(g, 1, 2);") == "g(1, 2);"


def test_expansion_does_not_glue_tokens() -> None:
    assert expand("#define NEG -1\nint x = -NEG;") == "int x = - -1;"


def test_command_line_defines_and_predefined() -> None:
    assert expand("int a[N]; int b = SQ(3);", N="64", **{"SQ(x)": "((x)*(x))"}) \
        == "int a[64]; int b = ((3)*(3));"
    assert expand("#ifdef __CUDACC__\ncuda\n#endif") == "cuda"


def test_wrong_argument_count() -> None:
    err = error_of("#define F(a, b) a\nint x =\n  F(1);")
    assert "takes 2 arguments" in err.message
    assert (err.loc.line, err.loc.col) == (3, 3)


# ---- conditionals ---------------------------------------------------------------------------

def test_if_elif_else_arithmetic() -> None:
    src = """#ifndef N
#define N 128
#endif
#if N * 2 > 300
big
#elif (N % 3 == 2) && !defined(SMALL)
mid
#else
small
#endif
"""
    assert expand(src) == "mid"
    assert expand(src, SMALL="") == "small"
    assert expand(src, N="200") == "big"


def test_if_defined_forms_and_nesting() -> None:
    src = """#if defined X || defined(Y)
  #ifdef X
    x
  #else
    y
  #endif
#elif 1
    none
#endif
#ifndef X
nx
#endif
"""
    assert expand(src, X="1") == "x"
    assert expand(src, Y="1") == "y nx"
    assert expand(src) == "none nx"


def test_if_c_integer_semantics() -> None:
    cases = {
        "-7 / 2 == -3": True, "-7 % 2 == -1": True, "0x10 == 16 && 010 == 8": True,
        "1 ? 2 : 3 / 0": True, "0 && 1 / 0": False, "UNDEFINED_NAME": False, "true": True,
        "(1 << 4) | 1 == 17": True, "10UL > 3": True, "'A' == 65": True, "~0 == -1": True,
        "-1 < 0u": False, "0xffffffffffffffff == -1": True, "(1 ? -1 : 0u) > 0": True,
        "-1 >> 63 == -1": True,
    }
    for expression, value in cases.items():
        assert expand(f"#if {expression}\nyes\n#else\nno\n#endif") == ("yes" if value else "no"), \
            expression


def test_if_errors() -> None:
    err = error_of("#if 1 / 0\n#endif")
    assert "division by zero" in err.message
    assert error_of("#if 1 +\n#endif").loc.line == 1
    assert "missing expression" in error_of("#if\n#endif").message


def test_inactive_branch_ignores_errors_and_unknown_directives() -> None:
    assert expand("#if 0\n#error no\n#frobnicate\nx\n#endif\ny") == "y"


# ---- includes, pragmas, lines, comments ------------------------------------------------------

def test_includes_are_dropped() -> None:
    src = '#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include "myheader.cuh"\n' \
        "#include <math.h>\nint x;"
    pp = preprocess(src, "t.cu")
    assert squash(pp.text) == "int x;"
    assert pp.text.splitlines()[4] == "int x;"


def test_pragma_unroll_forms() -> None:
    src = """#define UNROLL 8
#pragma unroll
for (;;) {}
  #pragma unroll 4
#pragma unroll UNROLL
#pragma unroll (2 * UNROLL)
#pragma unroll BLOCK
#pragma once
#pragma nv_diag_suppress 177
"""
    pp = preprocess(src, "t.cu")
    lines = pp.text.splitlines()
    assert lines[1] == "__pragma_unroll__();"
    assert lines[3:7] == ["__pragma_unroll__(4);", "__pragma_unroll__(8);",
                          "__pragma_unroll__(16);", "__pragma_unroll__(BLOCK);"]
    assert squash("\n".join(lines[7:])) == ""
    assert pp.loc(pp.text.index("__pragma_unroll__(4)")) == Loc("t.cu", 4, 3)


def test_underscore_pragma_is_unsupported() -> None:
    err = error_of('int x;\n  _Pragma("unroll") for (;;) {}', UnsupportedError)
    assert (err.loc.line, err.loc.col) == (2, 3)


def test_continuation_lines() -> None:
    src = "#define LONG(a) \\\n   ((a) + \\\n    1)\nint x = LONG(2);\nint y = 1 + \\\n 2;\nint z;"
    pp = preprocess(src, "t.cu")
    assert squash(pp.text) == "int x = ((2) + 1); int y = 1 + 2; int z;"
    assert pp.text.splitlines()[6] == "int z;"
    z = pp.text.index("int z")
    assert pp.loc(z) == Loc("t.cu", 7, 1)
    two = pp.text.index("2;")
    assert pp.loc(two) == Loc("t.cu", 6, 2)


def test_comments_become_spaces_and_literals_are_kept() -> None:
    src = 'int a; // c1 /* not a block\nint/*x*/b; char* s = "/* no */ // no";\n/* a\nb */ int c;'
    pp = preprocess(src, "t.cu")
    assert squash(pp.text) == 'int a; int b; char* s = "/* no */ // no"; int c;'
    assert pp.text.splitlines()[1].index("b;") == src.splitlines()[1].index("b;")


def test_directive_with_leading_comment() -> None:
    assert expand("/* x */ #define N 3\nint a = N;") == "int a = 3;"


def test_crlf_and_tabs() -> None:
    src = "#define N 4\r\nint a = N;\r\n#define L(x) \\\r\n  (x)\r\n\tint b = L(N);\r\n"
    pp = preprocess(src, "t.cu")
    assert squash(pp.text) == "int a = 4; int b = (4);"
    loc = pp.loc(pp.text.index("int b"))
    assert loc == Loc("t.cu", 5, 2)
    assert pp.source_line(loc) == "\tint b = L(N);"
    assert pp.loc(pp.text.index("(4)")) == Loc("t.cu", 5, 10)


# Classic corner cases (several from the C standard's examples): the token stream must match
# g++'s preprocessor.
GCC_CASES = [
    "#define x (x + 1)\n#define f(a) a + f(a)\nint y = x; int z = f(x);",
    "#define hash_hash # ## #\n#define mkstr(a) # a\n#define in_between(a) mkstr(a)\n"
    "#define join(c, d) in_between(c hash_hash d)\nchar p[] = join(x, y);",
    "#define t(x,y,z) x ## y ## z\nint j[] = { t(1,2,3), t(,4,5), t(6,,7), t(8,9,),\n"
    "t(10,,), t(,11,), t(,,12), t(,,) };",
    "#define f(a) a*g\n#define g(a) f(a)\nint r = f(2)(9);",
    "#define str(s) # s\n#define xstr(s) str(s)\n#define INCFILE(n) vers ## n\n"
    "const char* c = xstr(INCFILE(2).h); const char* d = str( strncmp(\"abc\\0d\", \"abc\", "
    "'\\4') == 0 );",
    "#define MAX(a,b) ((a)>(b)?(a):(b))\nint m = MAX(MAX(1,2),MAX(3,MAX(4,5)));",
    "#define LPAREN (\n#define RPAREN )\n#define F(x, y) x + y\n#define E(...) __VA_ARGS__\n"
    "int e = E(F, LPAREN, 'a', 'b', RPAREN);",
    "#define CAT(a,b) a##b\n#define XCAT(a,b) CAT(a,b)\n#define N 4\nint XCAT(v, N) = CAT(N, N);",
    "#define F(x) [x]\n#define G F\nG(1) G (2) G\n#define h(x) x\nh(h)(1)",
    "#if (2 || 1/0) && -1 < 0u\nA\n#elif 1\nB\n#endif\n"
    "#if 0x7fffffffffffffff > 0 && (3 ? 4 : 5) == 4 && 1 << 62 > 0 && __LINE__ == 6\nC\n#endif",
]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("source", GCC_CASES)
def test_matches_gcc(source: str) -> None:
    reference = subprocess.run(["g++", "-E", "-P", "-x", "c++", "-std=c++17", "-"],
                               input=source, capture_output=True, text=True, check=True).stdout
    assert "".join(preprocess(source, "t.cu").text.split()) == "".join(reference.split())


# ---- the source map --------------------------------------------------------------------------

def test_macro_tokens_map_to_the_macro_use() -> None:
    src = "#define N 128\n#define SQ(x) ((x) * (x))\n\nint a =   SQ(N) + q;\n"
    pp = preprocess(src, "t.cu")
    use = where(src, "SQ(N)")
    star = pp.text.index("*")
    assert (pp.loc(star).line, pp.loc(star).col) == use
    assert (pp.loc(pp.text.index("128")).line, pp.loc(pp.text.index("128")).col) \
        == where(src, "N)")  # N was an argument: it maps to where the user wrote it
    q = pp.loc(pp.text.index("q;"))
    assert (q.line, q.col) == where(src, "q;")
    assert pp.source_line(q) == "int a =   SQ(N) + q;"


def test_token_after_block_comment_maps_to_true_position() -> None:
    src = "int a;\n/* one\n   two\n   three */ float  value = 1;\nint b;"
    pp = preprocess(src, "t.cu")
    loc = pp.loc(pp.text.index("value"))
    assert loc == Loc("t.cu", 4, 20)
    assert pp.loc(pp.text.index("int b")) == Loc("t.cu", 5, 1)
    assert pp.loc(pp.text.index("value") + 3) == Loc("t.cu", 4, 23)


def test_every_plain_character_maps_to_itself() -> None:
    src = "#define K 3\n__global__ void f(float* x) {\n\tx[threadIdx.x] *= 2.0f;\n}\n"
    pp = preprocess(src, "t.cu")
    for offset, char in enumerate(pp.text):
        if not char.isspace():
            loc = pp.loc(offset)
            assert pp.source_line(loc)[loc.col - 1] == char


def test_error_helper_renders_caret() -> None:
    pp: Preprocessed = preprocess("#define N 4\nint x = N;", "t.cu")
    rendered = str(pp.error("bad thing", pp.text.index("4")))
    assert rendered.splitlines() == ["t.cu:2:9: error: bad thing", "    int x = N;",
                                     "            ^"]


# ---- errors ----------------------------------------------------------------------------------

def test_unterminated_if() -> None:
    err = error_of("int a;\n  #ifdef X\nint b;\n")
    assert "unterminated #ifdef" in err.message
    assert err.loc == Loc("t.cu", 2, 3)
    assert str(err).startswith("t.cu:2:3: error:")
    assert err.source_line == "  #ifdef X"


def test_stray_endif_else_elif() -> None:
    assert error_of("int a;\n#endif\n").loc == Loc("t.cu", 2, 1)
    assert "#else without #if" in error_of("#else\n").message
    assert "#elif after #else" in error_of("#if 1\n#else\n#elif 1\n#endif").message


def test_error_directive() -> None:
    err = error_of("#if 1\n   #error tile size must be 16\n#endif")
    assert err.message == "#error tile size must be 16"
    assert err.loc == Loc("t.cu", 2, 4)


def test_unterminated_comment() -> None:
    err = error_of("int a;\nint b; /* open\nint c;")
    assert "unterminated" in err.message
    assert err.loc == Loc("t.cu", 2, 8)
    assert "^" in str(err)


def test_unknown_directive() -> None:
    err = error_of("int a;\n# frobnicate 3\n")
    assert "unknown preprocessor directive '#frobnicate'" in err.message
    assert err.loc == Loc("t.cu", 2, 3)


def test_bad_defines() -> None:
    assert "macro name" in error_of("#define 3 4").message
    assert "'#' is not followed" in error_of("#define F(x) # y").message
    assert "'##'" in error_of("#define F(x) ## x").message
    err = error_of("#define F(a, b) a\nint x = F(1, 2")
    assert "unterminated argument list" in err.message
    assert err.loc == Loc("t.cu", 2, 9)


def test_deep_and_exploding_expansions_fail_cleanly(monkeypatch: pytest.MonkeyPatch) -> None:
    deep = "#define F(x) x\nint y = " + "F(" * 300 + "1" + ")" * 300 + ";"
    assert "too deep" in error_of(deep).message
    # the real budget takes seconds to spend; the check is the same with a smaller one
    monkeypatch.setattr(macros, "MAX_EXPANDED_TOKENS", 20_000)
    boom = "#define A0 x x\n" + "".join(f"#define A{i} A{i-1} A{i-1}\n" for i in range(1, 40))
    err = error_of(boom + "int q = A39;\n")
    assert "too many tokens" in err.message
    assert err.loc == Loc("t.cu", 41, 9)
    nested = "#if " + "(" * 2000 + "1" + ")" * 2000 + "\n#endif"
    assert "too deeply nested" in error_of(nested).message


# ---- size and speed --------------------------------------------------------------------------

def test_one_megabyte_input_completes() -> None:
    unit = ("#define IDX(r, c) ((r) * TILE + (c))\n#define TILE 16\n"
            "__global__ void k(float* a) { /* c */ a[IDX(threadIdx.x, 1)] += 1.0f; }\n"
            "int plain_line_without_macros = 3;  // comment\n")
    text = unit * (1_000_000 // len(unit) + 1)
    pp = preprocess(text, "big.cu")
    assert pp.text.count("((threadIdx.x) * 16 + (1))") == text.count("IDX(threadIdx.x")
    last = pp.loc(pp.text.rindex("plain_line"))
    assert last.line == text.count("\n")


def test_input_size_limit() -> None:
    with pytest.raises(KirError, match="too large"):
        preprocess(" " * (MAX_INPUT_CHARS + 1), "huge.cu")
