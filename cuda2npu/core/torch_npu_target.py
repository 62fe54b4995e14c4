"""Which torch_npu release a migration targets (``options.target``) and what it offers.

``--target-torch-npu`` accepts a pip package version (``2.1.0.post10``, ``2.6.0``) or a TorchNPU
release (``7.2.0``, ``26.0.0``). Package versions map to releases through the compatibility
table of docs/reference/torch_npu.md §7 (the branch ``v{torch}-{release}`` of each package); an unknown
``.postN`` of a known torch version takes the newest listed release not after it, and an
unknown version the oldest documented release (6.0.0), so nothing newer than the target is
ever emitted. None means the newest documented release.

Keyword history (docs/reference/torch_npu.md §1.1, §2.3): ``npu_fusion_attention`` has its core keywords up
to ``sync`` from 6.0.0, ``softmax_layout`` from 7.2.0, ``sink`` from 7.3.0, ``dropout_mask`` /
``seed`` / ``offset`` from 26.0.0; ``npu_rotary_mul`` has ``rotary_mode`` from 7.0.0 and
``rotate`` from 26.0.0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Version = tuple[int, ...]

OLDEST_RELEASE: Version = (6, 0, 0)
NEWEST_RELEASE: Version = (26, 1, 0)
NEWEST_TEXT = "the newest documented release"

# torch_npu package version → TorchNPU release (docs/reference/torch_npu.md §7, active table)
PACKAGE_RELEASES: dict[str, Version] = {
    "2.12.0": (26, 1, 0),
    "2.11.0": (26, 1, 0),
    "2.10.0.post4": (26, 1, 0),
    "2.9.0.post6": (26, 1, 0),
    "2.7.1.post8": (26, 1, 0),
    "2.9.0.post2": (26, 0, 0),
    "2.8.0.post4": (26, 0, 0),
    "2.7.1.post4": (26, 0, 0),
    "2.9.0": (7, 3, 0),
    "2.8.0.post2": (7, 3, 0),
    "2.7.1.post2": (7, 3, 0),
    "2.6.0.post5": (7, 3, 0),
    "2.8.0": (7, 2, 0),
    "2.7.1": (7, 2, 0),
    "2.6.0.post3": (7, 2, 0),
    "2.1.0.post17": (7, 2, 0),
    "2.6.0": (7, 1, 0),
    "2.5.1.post1": (7, 1, 0),
    "2.1.0.post13": (7, 1, 0),
    "2.5.1": (7, 0, 0),
    "2.4.0.post4": (7, 0, 0),
    "2.3.1.post6": (7, 0, 0),
    "2.1.0.post12": (7, 0, 0),
    "2.4.0.post2": (6, 0, 0),
    "2.3.1.post4": (6, 0, 0),
    "2.1.0.post10": (6, 0, 0),
}

KEYWORD_SINCE: dict[tuple[str, str], Version] = {
    ("npu_fusion_attention", "softmax_layout"): (7, 2, 0),
    ("npu_fusion_attention", "sink"): (7, 3, 0),
    ("npu_fusion_attention", "dropout_mask"): (26, 0, 0),
    ("npu_fusion_attention", "seed"): (26, 0, 0),
    ("npu_fusion_attention", "offset"): (26, 0, 0),
    ("npu_rotary_mul", "rotary_mode"): (7, 0, 0),
    ("npu_rotary_mul", "rotate"): (26, 0, 0),
}

_PACKAGE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$")


def _fmt(version: Version) -> str:
    return ".".join(str(part) for part in version)


@dataclass(frozen=True)
class Target:
    """The targeted TorchNPU release and, when the package version says it, the torch version;
    ``pin``: the pin that chose it (``torch==2.4.0``), when the user did not."""

    text: str
    release: Version
    torch: Version | None
    pin: str = ""

    @property
    def chosen(self) -> str | None:
        """The version as the user or the pins gave it; None: the newest documented release."""
        return None if self.text == NEWEST_TEXT else self.text

    def supports(self, op: str, keyword: str) -> bool:
        return self.release >= KEYWORD_SINCE.get((op, keyword), OLDEST_RELEASE)

    def unsupported(self, op: str, keywords) -> list[str]:
        """Messages for the keywords of ``op`` that the target does not have."""
        return [
            f"`{op}({keyword}=...)` needs TorchNPU {_fmt(KEYWORD_SINCE[(op, keyword)])}, "
            f"the target is {self.text} (TorchNPU {_fmt(self.release)})"
            for keyword in keywords
            if not self.supports(op, keyword)
        ]

    def torch_at_least(self, version: Version) -> bool:
        return self.torch is None or self.torch >= version


def parse_target(text: str | None) -> Target:
    """The target a version names (None or empty: the newest documented release)."""
    if not text:
        return NEWEST
    text = text.strip()
    match = _PACKAGE.match(text)
    if not match:
        return Target(text, OLDEST_RELEASE, None)
    major, minor, patch, post = (int(g) if g is not None else None for g in match.groups())
    if major >= 5:  # a TorchNPU release number (5.0, 6.0.0 ... 7.3.0, 26.0.0)
        return Target(text, (major, minor, patch), None)
    torch = (major, minor, patch)
    if text in PACKAGE_RELEASES:
        return Target(text, PACKAGE_RELEASES[text], torch)
    candidates = []
    for package, release in PACKAGE_RELEASES.items():
        p = _PACKAGE.match(package)
        assert p is not None
        p_torch = tuple(int(g) for g in p.groups()[:3])
        p_post = int(p.group(4)) if p.group(4) else 0
        if p_torch == torch and p_post <= (post or 0):
            candidates.append(release)
    return Target(text, max(candidates) if candidates else OLDEST_RELEASE, torch)


NEWEST = Target(NEWEST_TEXT, NEWEST_RELEASE, None)
