"""Behaviour of the attention rules (NPU401–NPU406) beyond the catalogue examples and goldens."""

from __future__ import annotations

import libcst as cst
import pytest
from helpers import dedent, migrate_text, without_markers

from cuda2npu.analysis.kernel_rewrites import one_minus
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import literal
from cuda2npu.core.options import Options
from cuda2npu.core.torch_npu_target import parse_target

FLASH_CAUSAL = dedent(
    """
    import torch
    from flash_attn import flash_attn_func


    def attention(q, k, v):
        return flash_attn_func(q, k, v, causal=True)
    """
)


def codes(result, tier=None):
    return [f.code for f in result.findings if tier is None or f.tier is tier]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.1", "0.9"),
        ("0", "1.0"),
        ("0.0", "1.0"),
        ("1e-1", "0.9"),
        ("0.25", "0.75"),
        ("p", "1.0 - p"),
        ("self.p if self.training else 0.0", "1.0 - (self.p if self.training else 0.0)"),
        ("a + b", "1.0 - (a + b)"),
    ],
)
def test_keep_prob_folds_literals_and_parenthesizes_expressions(text, expected):
    assert one_minus(cst.parse_expression(text)) == expected


def test_literal_values():
    assert literal(cst.parse_expression("(-1, 4)")) == (-1, 4)
    assert literal(cst.parse_expression("None")) is None


def test_check_mode_reports_without_helper_finding():
    _, result = migrate_text(FLASH_CAUSAL, Options(fix=False))
    # the call, and the flash-attn import the file cannot do on an NPU host as it is (NPU606);
    # the helper/import entry only exists when fixing
    assert codes(result) == ["NPU606", "NPU401"]


def test_max_tier_exact_changes_nothing_numeric():
    after, result = migrate_text(FLASH_CAUSAL, Options(max_tier=Tier.EXACT))
    assert without_markers(after) == FLASH_CAUSAL  # the numeric call is left, marked for review
    assert "# TODO(cuda2npu): NPU401 review:" in after and "_npu_causal_mask" not in after


def test_helper_added_once_for_many_calls_and_kept_on_rerun():
    source = FLASH_CAUSAL + "\n\ndef other(q, k, v):\n    return flash_attn_func(q, k, v, causal=True)\n"
    after, _ = migrate_text(source)
    assert after.count("def _npu_causal_mask") == 1
    assert after.count("import functools") == 1
    again, second = migrate_text(after)
    assert again == after and not second.findings


def test_hoisted_name_avoids_names_bound_in_the_file():
    source = dedent(
        """
        from flash_attn import flash_attn_func


        def attention(query, k, v):
            out = flash_attn_func(query.float(), k, v)
            return out.to(query.dtype)
        """
    )
    after, _ = migrate_text(source)
    assert "query_npu = query.float()" in after
    assert "return out.to(query.dtype)" in after  # the parameter keeps its value


def test_guarded_and_reexported_imports_are_kept():
    source = dedent(
        """
        import torch

        try:
            from flash_attn import flash_attn_func
        except ImportError:
            flash_attn_func = None
        from flash_attn import flash_attn_varlen_func

        __all__ = ["flash_attn_varlen_func"]


        def attention(q, k, v):
            return flash_attn_func(q, k, v)
        """
    )
    after, result = migrate_text(source)
    assert "from flash_attn import flash_attn_func" in after
    assert "from flash_attn import flash_attn_varlen_func" in after
    assert "NPU405" not in codes(result)


def test_unused_name_is_dropped_from_a_multi_name_import():
    source = dedent(
        """
        import torch
        from flash_attn import flash_attn_func, flash_attn_with_kvcache


        def attention(q, k, v, kc, vc):
            return flash_attn_func(q, k, v), flash_attn_with_kvcache(q, kc, vc)
        """
    )
    after, result = migrate_text(source)
    assert "from flash_attn import flash_attn_with_kvcache\n" in after
    assert "NPU403" in codes(result, Tier.MANUAL)


def test_shadowed_name_is_not_flash_attn():
    source = dedent(
        """
        from flash_attn import flash_attn_func


        def attention(q, k, v, flash_attn_func=None):
            return flash_attn_func(q, k, v)
        """
    )
    after, result = migrate_text(source)
    # only the module-level import is reported (NPU606: it fails on an NPU host), not the call
    assert without_markers(after) == source and codes(result) == ["NPU606"]


def test_call_in_condition_is_rewritten_without_hoisting_names():
    source = dedent(
        """
        from flash_attn import flash_attn_func


        def attention(q, k, v):
            if flash_attn_func(q, k, v).isnan().any():
                raise ValueError
        """
    )
    after, _ = migrate_text(source)
    assert "torch_npu.npu_fusion_attention(" in after and "import torch\n" in after


def test_sdpa_is_opt_in():
    source = dedent(
        """
        import torch.nn.functional as F


        def attention(q, k, v):
            return F.scaled_dot_product_attention(q, k, v)
        """
    )
    assert migrate_text(source, Options())[0] == source
    by_flag, _ = migrate_text(source, Options(fuse_sdpa=True))
    by_select, _ = migrate_text(source, Options(select=("NPU", "NPU406")))
    assert "npu_fusion_attention" in by_flag and by_flag == by_select
    ignored, _ = migrate_text(source, Options(fuse_sdpa=True, ignore=("NPU406",)))
    assert ignored == source


@pytest.mark.parametrize(
    ("target", "release", "torch"),
    [
        (None, (26, 1, 0), None),
        ("2.1.0.post10", (6, 0, 0), (2, 1, 0)),
        ("2.1.0.post11", (6, 0, 0), (2, 1, 0)),  # unlisted post: the newest listed one before it
        ("2.1.0.post17", (7, 2, 0), (2, 1, 0)),
        ("2.6.0.post5", (7, 3, 0), (2, 6, 0)),
        ("7.2.0", (7, 2, 0), None),
        ("26.0.0", (26, 0, 0), None),
        ("nonsense", (6, 0, 0), None),
    ],
)
def test_target_versions(target, release, torch):
    parsed = parse_target(target)
    assert parsed.release == release and parsed.torch == torch


def test_keywords_newer_than_the_target_are_refused():
    old = parse_target("2.1.0.post12")  # TorchNPU 7.0.0
    assert old.supports("npu_fusion_attention", "keep_prob")
    assert old.supports("npu_rotary_mul", "rotary_mode")
    assert not old.supports("npu_fusion_attention", "softmax_layout")
    assert old.unsupported("npu_fusion_attention", ["sink", "scale"]) == [
        "`npu_fusion_attention(sink=...)` needs TorchNPU 7.3.0, the target is 2.1.0.post12 (TorchNPU 7.0.0)"
    ]
    assert parse_target("26.0.0").supports("npu_fusion_attention", "dropout_mask")


def test_helper_is_added_when_only_some_codes_are_enabled():
    source = dedent(
        """
        import torch
        from flash_attn import flash_attn_func, flash_attn_varlen_func


        def attention(q, k, v, cu, m):
            return flash_attn_func(q, k, v, causal=True), flash_attn_varlen_func(q, k, v, cu, cu, m, m, causal=True)
        """
    )
    after, _ = migrate_text(source, Options(ignore=("NPU401",)))
    assert "def _npu_causal_mask" in after and "flash_attn_func(q, k, v, causal=True)" in after
