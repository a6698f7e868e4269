"""Retrieval: condition filters first, then BM25 ranking (and optional embedding fusion)."""
from __future__ import annotations

import math

import pytest

from kernelwright.memory.bm25 import BM25Index, tokenize
from kernelwright.memory.skills import Conditions, SkillLibrary, builtin_library, format_skills


@pytest.fixture(scope="module")
def library() -> SkillLibrary:
    return builtin_library()


def names(skills):
    return [s.name for s in skills]


@pytest.mark.parametrize(
    "query, conditions, expected_first",
    [
        ("softmax rows exp max", Conditions(op_kinds="softmax"), "online-softmax"),
        ("softmax rows exp max", None, "online-softmax"),
        ("16-byte float4 loads alignment", Conditions(bottleneck="memory"), "vectorized-access"),
        ("shared memory bank conflicts padding transpose", Conditions(backend="cuda"), "bank-conflict-padding"),
        ("variance mean layernorm numerically stable", Conditions(op_kinds="norm"), "welford-norm"),
        ("many small kernel launches cuda graphs", Conditions(bottleneck="launch"), "launch-overhead-cuda-graphs"),
        ("few output tiles long K dimension", Conditions(op_kinds="matmul"), "split-k"),
        ("warp shuffle reduce sum across lanes", Conditions(backend="cuda"), "warp-shuffle-reduction"),
        ("transposed convolution stride output padding", Conditions(op_kinds="conv_transpose"), "conv-transpose-as-gather"),
        ("what is cheating caching outputs mutating inputs", None, "judge-rules"),
    ],
)
def test_ranking_puts_the_obvious_skill_first(library, query, conditions, expected_first):
    assert names(library.retrieve(query, conditions, k=3))[0] == expected_first


def test_backend_filter_excludes_triton_only_skills(library):
    query = "triton autotune configs num_warps num_stages"
    assert names(library.retrieve(query, Conditions(backend="triton"), k=3))[0] == "triton-autotune-configs"
    cuda_results = library.retrieve(query, Conditions(backend="cuda"), k=50)
    assert "triton-autotune-configs" not in names(cuda_results)
    assert all(s.applies_when.backend & {"cuda", "any"} for s in cuda_results)


def test_bottleneck_filter(library):
    results = library.retrieve("shared memory bank conflicts", Conditions(bottleneck="host"), k=50)
    assert "bank-conflict-padding" not in names(results)
    assert results, "host-bound skills exist and mention memory"
    assert all(s.applies_when.bottleneck & {"host", "any"} for s in results)


def test_op_kind_and_gpu_filters(library):
    query = "transposed convolution gather"
    assert "conv-transpose-as-gather" not in names(library.retrieve(query, Conditions(op_kinds="softmax"), k=50))
    tma = "tma tensor descriptor block pointer"
    assert names(library.retrieve(tma, Conditions(gpu="sm_90"), k=1)) == ["triton-block-pointers"]
    assert "triton-block-pointers" not in names(library.retrieve(tma, Conditions(gpu="sm_70"), k=50))


def test_unknown_query_values_only_match_any(library):
    results = library.retrieve("kernel", Conditions(op_kinds="sparse_gather"), k=100)
    assert results and all("any" in s.applies_when.op_kinds for s in results)


def test_k_limits_and_unrelated_queries_return_nothing(library):
    assert len(library.retrieve("memory", k=2)) == 2
    assert library.retrieve("zzzqqq unrelatedword", k=5) == []


def test_empty_query_returns_most_specific_matching_skills(library):
    results = library.retrieve("", Conditions(op_kinds="scan", backend="cuda"), k=4)
    assert len(results) == 4
    specificity = [s.applies_when.specificity() for s in results]
    assert specificity == sorted(specificity, reverse=True)


def test_conditions_matching_semantics():
    skill_side = Conditions(op_kinds=["matmul", "conv"], bottleneck="compute", backend="triton", gpu="sm_90")
    assert skill_side.matches(Conditions(op_kinds="conv"))
    assert skill_side.matches(Conditions(op_kinds=["pool", "matmul"], backend=["cuda", "triton"]))
    assert not skill_side.matches(Conditions(op_kinds="pool"))
    assert not skill_side.matches(Conditions(gpu="sm_80"))
    assert Conditions().matches(skill_side) and skill_side.matches(Conditions())
    assert Conditions(op_kinds=[]).op_kinds == {"any"}


def test_bm25_matches_hand_computed_okapi_score():
    # Three hand-written token lists; the expected value is the Okapi formula worked by hand:
    # idf(c) = ln(1 + (3 - 1 + 0.5) / (1 + 0.5)) = ln(8/3); avgdl = 2; doc 1 has |d| = 3, tf(c) = 2;
    # score = ln(8/3) * 2 * 2.5 / (2 + 1.5 * (0.25 + 0.75 * 3 / 2)) = ln(8/3) * 5 / 4.0625.
    index = BM25Index([["x", "y"], ["x", "c", "c"], ["z"]])
    assert index.score(["c"], 1) == pytest.approx(math.log(8 / 3) * 5 / 4.0625)
    assert index.score(["c"], 0) == 0.0
    # rarer terms weigh more; repeated query terms count once
    assert index.score(["z"], 2) > index.score(["x"], 0)
    assert index.score(["c", "c"], 1) == index.score(["c"], 1)


def test_bm25_length_normalisation_prefers_short_documents():
    index = BM25Index([["a", "b"], ["a", "b", "c", "d", "e", "f", "g", "h"]])
    assert index.score(["a"], 0) > index.score(["a"], 1)


def test_tokenizer_splits_identifiers_and_folds_plurals():
    tokens = tokenize("Rows of __shfl_xor_sync and bank-conflicts; the warps")
    assert {"row", "shfl_xor_sync", "shfl", "xor", "sync", "bank", "conflict", "warp"} <= set(tokens)
    assert "the" not in tokens and "of" not in tokens


def test_embedding_fusion_reorders_only_bm25_hits(library):
    """A toy encoder (hand-written, not a model) that favours one skill must lift it within the hits."""
    favourite = "fast-math-intrinsics"

    def toy_encoder(texts):
        return [[1.0, 0.0] if ("intrinsic" in t.lower() and "transcendental" in t.lower()) or t == "QUERY exp"
                else [0.0, 1.0] for t in texts]

    fused = SkillLibrary(library.skills, encoder=toy_encoder)
    plain = fused.retrieve("QUERY exp", k=50)
    baseline = library.retrieve("QUERY exp", k=50)
    assert set(names(plain)) == set(names(baseline))
    assert names(plain).index(favourite) < names(baseline).index(favourite)


def test_broken_encoder_falls_back_to_bm25(library):
    def broken(texts):
        raise RuntimeError("model exploded")

    fused = SkillLibrary(library.skills, encoder=broken)
    assert names(fused.retrieve("softmax rows", k=3)) == names(library.retrieve("softmax rows", k=3))


def test_format_skills_respects_budget(library):
    skills = library.retrieve("matmul tensor cores tiles", Conditions(op_kinds="matmul"), k=5)
    text = format_skills(skills, max_chars=3000)
    assert len(text) <= 3000
    assert text.startswith(f"### [{skills[0].name}]")
    assert len(format_skills(skills, max_chars=100_000)) > len(text)
    assert format_skills(skills, max_chars=10) == ""


def test_conditions_may_be_a_mapping_and_bad_ones_are_named(library):
    as_mapping = library.retrieve("softmax rows", {"op_kinds": ["softmax"], "backend": "triton"}, k=3)
    assert names(as_mapping) == names(library.retrieve("softmax rows", Conditions(op_kinds="softmax", backend="triton"), k=3))
    with pytest.raises(TypeError, match="conditions must be"):
        library.retrieve("softmax", {"opkinds": ["softmax"]})


def test_skills_are_hashable(library):
    assert len(set(library.skills)) == len(library)
