import ast

from kernelwright.problem.pysource import attribute_chain, dotted_name, import_aliases, imported_modules, qualified


def expr(text: str) -> ast.AST:
    return ast.parse(text, mode="eval").body


def test_a_chain_from_a_name_reads_the_same_both_ways():
    assert dotted_name(expr("torch.nn.functional.relu")) == attribute_chain(expr("torch.nn.functional.relu"))
    assert dotted_name(expr("x")) == "x"


def test_a_chain_from_a_call_keeps_its_attributes_only_for_the_forbidding_scan():
    node = expr("make().compile.now")
    assert attribute_chain(node) == "compile.now"
    assert dotted_name(node) == ""


def test_imports_bind_what_python_binds():
    tree = ast.parse("import a.b\nimport c.d as e\nfrom torch import compile as tc\n")
    assert import_aliases(tree) == {"a": "a", "e": "c.d", "tc": "torch.compile"}
    assert imported_modules(tree) == {"a.b", "c.d", "torch"}
    assert qualified("tc.x", import_aliases(tree)) == "torch.compile.x"
    assert qualified("other.y", {}) == "other.y"
