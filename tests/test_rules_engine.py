"""The rule engine: step strings, traces, the registry and declarative rules."""

from __future__ import annotations

import pytest

from kir.driver.registry import Registry, load_registry, load_rules_file
from kir.errors import KirError
from kir.ir import Binary, Block, Call, Const, Declare, Kernel, Launch, Load, Param, Store, Var
from kir.ir.types import F32, I32, PointerType
from kir.rules import (
    NotApplicable,
    ParamSpace,
    RuleContext,
    Step,
    apply_trace,
    load_trace,
    parse_step,
    save_trace,
)
from kir.rules.pattern import parse_rules


def kernel_with(expr) -> Kernel:
    return Kernel(
        "k",
        (Param("x", PointerType(F32, const=True)), Param("y", PointerType(F32))),
        Block((Declare("i", I32, Const(0, I32)), Store("y", Var("i", I32), expr))),
        Launch(("1", "1", "1"), (32, 1, 1)),
    )


X = Load("x", Var("i", I32), F32)
RULES_TEXT = """
# test rules
rule exp2-it "exp as exp2": exp(?x) => exp2(?x * 1.4426950408889634) if float(?x)
rule times-one "x * 1 => x": ?x * 1.0 => ?x
"""


@pytest.fixture
def registry() -> Registry:
    reg = Registry()
    reg.add_all(parse_rules(RULES_TEXT, "test.rules"), "test.rules")
    return reg


def test_declarative_rule_rewrites_matching_call(registry):
    k = kernel_with(Call("exp", (X,), F32))
    rule = registry["exp2-it"]
    assert rule.sites(k) == ["all", "0"]
    out = rule.rewrite(k, "0", {}, RuleContext())
    assert out.body.stmts[1].value == Call(
        "exp2", (Binary("*", X, Const(1.4426950408889634, F32), F32),), F32)


def test_declarative_rule_does_not_match_fast_form_or_ints(registry):
    assert registry["exp2-it"].sites(kernel_with(Call("exp", (X,), F32, fast=True))) == []
    # 1 (int) does not match the float literal 1.0
    int_mul = Binary("*", Var("i", I32), Const(1, I32), I32)
    as_float = Binary("*", X, Binary("+", X, X, F32), F32)
    assert registry["times-one"].sites(kernel_with(Binary("+", as_float, X, F32))) == []
    assert registry["times-one"].sites(
        kernel_with(Load("x", int_mul, F32))) == []
    k = kernel_with(Binary("*", X, Const(1.0, F32), F32))
    assert registry["times-one"].rewrite(k, "all", {}, RuleContext()).body.stmts[1].value == X
    assert isinstance(registry["times-one"].rewrite(kernel_with(X), "0", {}, RuleContext()),
                      NotApplicable)


def test_same_pattern_variable_must_bind_equal_trees():
    (rule,) = parse_rules('rule sq "x+x => 2x": ?a + ?a => ?a * 2.0')
    assert rule.sites(kernel_with(Binary("+", X, X, F32))) == ["all", "0"]
    other = Load("x", Const(1, I32), F32)
    assert rule.sites(kernel_with(Binary("+", X, other, F32))) == []


def test_step_round_trips_and_validates(registry):
    step = parse_step("exp2-it{at=0}", registry)
    assert str(step) == "exp2-it{at=0}"
    with pytest.raises(KirError, match="unknown rule"):
        parse_step("no-such-rule{at=0}", registry)
    with pytest.raises(KirError, match="names no site"):
        parse_step("exp2-it{}", registry)
    with pytest.raises(KirError, match="no parameter"):
        parse_step("exp2-it{at=0,factor=4}", registry)
    with pytest.raises(KirError, match="malformed step"):
        parse_step("exp2-it{at=0", registry)


def test_param_space_parses_only_its_choices():
    space = ParamSpace("factor", (2, 4, 8))
    assert space.parse("4") == 4
    with pytest.raises(KirError, match="choose one of 2, 4, 8"):
        space.parse("3")


def test_trace_saves_replays_and_skips_stale_steps(tmp_path, registry):
    k = kernel_with(Call("exp", (Binary("*", X, Const(1.0, F32), F32),), F32))
    steps = [parse_step("times-one{at=0}", registry), parse_step("exp2-it{at=0}", registry),
             parse_step("times-one{at=0}", registry)]  # the third no longer matches
    path = tmp_path / "t.json"
    save_trace(steps, path, kernel=k)
    replayed = load_trace(path, registry)
    assert replayed == steps
    result = apply_trace(k, replayed, registry)
    assert [str(s) for s in result.applied] == ["times-one{at=0}", "exp2-it{at=0}"]
    assert len(result.skipped) == 1 and "no site" in result.skipped[0][1]
    assert isinstance(result.kernel.body.stmts[1].value, Call)
    assert result.kernel.body.stmts[1].value.fn == "exp2"
    with pytest.raises(KirError, match="does not apply"):
        apply_trace(k, replayed, registry, strict=True)


def test_malformed_rules_file_names_line_and_column():
    with pytest.raises(KirError) as err:
        parse_rules('rule ok "x": exp(?x) => ?x\nrule bad "y": exp(?x => ?x\n', "bad.rules")
    assert err.value.loc.file == "bad.rules" and err.value.loc.line == 2
    with pytest.raises(KirError, match="does not bind"):
        parse_rules('rule r "d": exp(?x) => exp2(?y)')
    with pytest.raises(KirError, match="unknown guard"):
        parse_rules('rule r "d": exp(?x) => exp2(?x) if shiny(?x)')


def test_user_rules_file_and_python_module_load(tmp_path):
    rules = tmp_path / "mine.rules"
    rules.write_text('rule my-rule "mine": log(exp(?x)) => ?x\n')
    assert [r.name for r in load_rules_file(rules)] == ["my-rule"]
    module = tmp_path / "mine.py"
    module.write_text(
        "from kir.rules.pattern import parse_rules\n"
        "RULES = parse_rules('rule py-rule \"from python\": sqrt(?x) * sqrt(?x) => ?x')\n")
    registry = load_registry([rules, module], plugins=False)
    assert {"my-rule", "py-rule", "exp-to-exp2"} <= set(registry)
    with pytest.raises(KirError, match="clashes"):
        load_registry([rules, rules], plugins=False)


def test_step_string_form():
    assert str(Step("tile-loop", "L2", (("factor", 4),), "loop")) == "tile-loop{loop=L2,factor=4}"
