"""The strategy settings, each declared once: its configuration key, its command-line flag, its
values and its help. The configuration reader (core/config.py), the command line
(commands/cli.py), ``--show-settings`` (project/settings.py) and the settings table of
docs/ci-integration.md (tests/test_strategy_settings.py) are made from this list."""

from __future__ import annotations

import re
from dataclasses import dataclass

VERSION = re.compile(r"^\d+(\.\d+){1,3}(\.post\d+)?$")


@dataclass(frozen=True)
class StrategySetting:
    key: str  # the configuration key (`fuse-sdpa`)
    field: str  # the Options / Config field (`fuse_sdpa`)
    kind: str  # "choice", "bool" or "version"
    help: str
    choices: tuple[str, ...] = ()
    default: object = None
    param: str | None = None  # the click parameter, when not the field (`apex_strategy`)
    metavar: str | None = None

    @property
    def flag(self) -> str:
        """The command-line flag: ``--fuse-sdpa`` (``--fuse-sdpa/--no-fuse-sdpa`` for a boolean)."""
        return f"--{self.key}/--no-{self.key}" if self.kind == "bool" else f"--{self.key}"

    @property
    def expected(self) -> str:
        """What the configuration accepts, for its error messages."""
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "bool":
            return "true or false"
        return "a torch release such as '2.6' or '2.7.1'"


STRATEGY_SETTINGS = (
    StrategySetting(
        "precision", "precision", "choice", "Mixed-precision policy for AMP rewrites.", ("bf16", "fp16", "keep"), "bf16"
    ),
    StrategySetting(
        "apex",
        "apex",
        "choice",
        "native: apex to torch AMP/optimizers; ascend: keep apex for Ascend's apex fork.",
        ("native", "ascend"),
        "native",
        param="apex_strategy",
    ),
    StrategySetting(
        "colossalai",
        "colossalai",
        "choice",
        "keep: ColossalAI on NPU; native: plain PyTorch distributed.",
        ("keep", "native"),
        "keep",
        param="colossalai_strategy",
    ),
    StrategySetting(
        "fuse-sdpa",
        "fuse_sdpa",
        "bool",
        "Rewrite F.scaled_dot_product_attention to npu_fusion_attention (opt-in).",
        default=False,
    ),
    StrategySetting(
        "portable",
        "portable",
        "bool",
        "Write device-agnostic code that runs on CUDA and on Ascend NPUs (docs/migrate.md: Portable output).",
        default=False,
    ),
    StrategySetting(
        "target-torch",
        "target_torch",
        "version",
        "With --portable: the oldest torch the output runs on (torch.accelerator calls it lacks go through a "
        "generated helper).",
        metavar="VERSION",
    ),
)
STRATEGY_CHOICES = {s.key: s.choices for s in STRATEGY_SETTINGS if s.kind == "choice"}


def parse_value(setting: StrategySetting, value) -> object:
    """The configuration's value for ``setting``; ValueError with what is allowed when it is invalid."""
    if setting.kind == "choice" and value not in setting.choices:
        raise ValueError(f"allowed values: {', '.join(setting.choices)}")
    if setting.kind == "bool" and not isinstance(value, bool):
        raise ValueError("allowed values: true, false")
    if setting.kind == "version" and (not isinstance(value, str) or not VERSION.match(value)):
        raise ValueError(f"expected {setting.expected}")
    return value
