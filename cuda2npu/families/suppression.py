"""NPU005 (unused ``# noqa``): the rule class that lets commented files through the prefilter.

The check itself runs in the engine (:func:`cuda2npu.core.noqa.suppress`), where every finding is known.
"""

from cuda2npu.core.noqa import UNUSED_CODE
from cuda2npu.core.rulebase import Rule, register


@register
class UnusedNoqa(Rule):
    """Lets files with a noqa comment through the prefilter when NPU005 is enabled."""

    codes = (UNUSED_CODE,)
    triggers = (r"[Nn][Oo][Qq][Aa]",)
