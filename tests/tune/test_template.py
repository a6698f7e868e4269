"""Template declaration, instantiation and restriction (hand-written template text)."""
import ast

import pytest

from kernelwright.tune.template import TemplateError, config_key, parse_template

# hand-written test template: plain Python, so an instance can be executed without Triton
SOURCE = '''import math

KW_TUNE = {
    "params": {"BLOCK": {"pow2": [64, 1024]}, "num_warps": [2, 4, 8], "UNROLL": {"range": [1, 3]},
               "MODE": ["fast", "safe"]},
    "constraints": ["BLOCK >= num_warps * WARP_SIZE"],
    "defaults": {"BLOCK": 256, "num_warps": 4, "UNROLL": 2, "MODE": "safe"},
    "sizes": {"N": 4096},
}
KW_PARAMS = dict(KW_TUNE["defaults"])


class ModelNew:
    def config(self):
        return KW_PARAMS["BLOCK"], KW_PARAMS["num_warps"], KW_PARAMS["UNROLL"], KW_PARAMS["MODE"]
'''


def run_instance(source):
    namespace = {}
    exec(compile(source, "instance.py", "exec"), namespace)
    return namespace["ModelNew"]().config()


def test_parse_expands_domains_and_keeps_order():
    t = parse_template(SOURCE, name="demo")
    assert t.params["BLOCK"] == (64, 128, 256, 512, 1024)
    assert t.params["UNROLL"] == (1, 2, 3)
    assert list(t.params) == ["BLOCK", "num_warps", "UNROLL", "MODE"]
    assert t.space_size == 5 * 3 * 3 * 2
    assert t.sizes == {"N": 4096}
    assert t.backend == "triton" and t.name == "demo"


def test_instance_is_standalone_with_literal_params():
    t = parse_template(SOURCE)
    source = t.instantiate({"BLOCK": 512, "MODE": "fast"})
    assert run_instance(source) == (512, 4, 2, "fast")  # missing names took their defaults
    line = next(x for x in source.splitlines() if x.startswith("KW_PARAMS ="))
    assert ast.literal_eval(line.split("=", 1)[1].split("#")[0].strip())["BLOCK"] == 512
    assert run_instance(t.default_instance()) == (256, 4, 2, "safe")
    # an instance is itself a valid template whose declaration is unchanged
    assert parse_template(source).params == t.params


def test_instantiate_refuses_values_outside_the_domain():
    t = parse_template(SOURCE)
    with pytest.raises(TemplateError, match="outside its domain"):
        t.instantiate({"BLOCK": 100})
    with pytest.raises(TemplateError, match="unknown parameter"):
        t.instantiate({"BLOK": 128})


@pytest.mark.parametrize("mutate, message", [
    (lambda s: s.replace('KW_PARAMS = dict(KW_TUNE["defaults"])\n', ""), "exactly one module-level assignment"),
    (lambda s: s.replace('"defaults": {"BLOCK": 256, ', '"defaults": {'), "lacks BLOCK"),
    (lambda s: s.replace('"BLOCK": 256, "num', '"BLOCK": 300, "num'), "not in its domain"),
    (lambda s: s.replace('"sizes": {"N": 4096},', '"sizes": {"N": math.pi},'), "literal dict"),
    (lambda s: s.replace('return KW_PARAMS["BLOCK"], KW_PARAMS["num_warps"], KW_PARAMS["UNROLL"], KW_PARAMS["MODE"]',
                         "return 1"), "never reads KW_PARAMS"),
    (lambda s: s.replace("BLOCK >= num_warps", "BLOCKS >= num_warps"), "unknown name"),
    (lambda s: s.replace('"MODE": ["fast", "safe"]', '"MODE": []'), "empty domain"),
    (lambda s: s.replace('"sizes"', '"size"'), "unknown key"),
    (lambda s: s + "\nKW_TUNE = {}\n", "exactly one"),
    (lambda s: s.replace("import math", "import math +"), "not valid Python"),
])
def test_bad_templates_say_what_to_fix(mutate, message):
    with pytest.raises(TemplateError, match=message):
        parse_template(mutate(SOURCE))


def test_restrict_pins_and_narrows_without_changing_identity():
    t = parse_template(SOURCE)
    sub = t.restrict(fixed={"MODE": "fast"}, domains={"BLOCK": [128, 256, 999]})
    assert sub.params["MODE"] == ("fast",) and sub.params["BLOCK"] == (128, 256)
    assert sub.defaults["MODE"] == "fast" and sub.space_size == 2 * 3 * 3
    assert sub.hash == t.hash  # same source: cached measurements stay valid
    with pytest.raises(TemplateError):
        t.restrict(fixed={"BLOCK": 3})


def test_config_key_is_order_independent():
    assert config_key({"a": 1, "b": "x"}) == config_key({"b": "x", "a": 1})
