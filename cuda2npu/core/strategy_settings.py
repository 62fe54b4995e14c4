"""The settings a user chooses for a whole run, each declared once: its configuration key, its
command-line flag, its values, its help and the command it belongs to. The configuration reader
(core/config.py), the command line (commands/cli.py), ``--show-settings`` (project/settings.py)
and the settings table of docs/ci-integration.md (tests/test_strategy_settings.py) are made from
this list: the strategies (how to migrate, read by ``check`` and ``migrate``) and ``migrate``'s
output policy (which fixes it applies, where it writes markers)."""

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
    command: str = ""  # "migrate": that command's option only (check never writes); "": both

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
OUTPUT_SETTINGS = (
    StrategySetting(
        "max-tier",
        "max_tier",
        "choice",
        "The highest fix tier migrate applies; the fixes above it are left as markers.",
        ("exact", "numeric", "review"),
        "review",
        command="migrate",
    ),
    StrategySetting(
        "markers",
        "markers",
        "bool",
        "Add `# TODO(cuda2npu)` comments at the findings a human must handle (--no-markers: none at all).",
        default=True,
        command="migrate",
    ),
    StrategySetting(
        "review-markers",
        "review_markers",
        "bool",
        "Add `# TODO(cuda2npu)` comments at review items too (--no-review-markers: at manual items only).",
        default=True,
        command="migrate",
    ),
)
SETTINGS = STRATEGY_SETTINGS + OUTPUT_SETTINGS


def parse_value(setting: StrategySetting, value) -> object:
    """The configuration's value for ``setting``; ValueError with what is allowed when it is invalid."""
    if setting.kind == "choice" and value not in setting.choices:
        raise ValueError(f"allowed values: {', '.join(setting.choices)}")
    if setting.kind == "bool" and not isinstance(value, bool):
        raise ValueError("allowed values: true, false")
    if setting.kind == "version" and (not isinstance(value, str) or not VERSION.match(value)):
        raise ValueError(f"expected {setting.expected}")
    return value
