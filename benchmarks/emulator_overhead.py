"""Overhead of the npu emulator: forward+backward on plain CPU vs on the emulated ``npu`` device.

Run: ``python benchmarks/emulator_overhead.py [--repeats N]``. Prints the best-of-N time per
training step for a small MLP and a transformer block, on CPU and on ``npu`` (same process,
same threads), and the ratio. docs/design.md §6 expects about 2x on small models: every aten op
on an npu tensor costs one Python dispatch on top of the CPU kernel.
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

from cuda2npu.emulation import emulate_npu


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256), torch.nn.LayerNorm(256)
    )


def _transformer_block() -> torch.nn.Module:
    return torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, dropout=0.0, batch_first=True)


def _timed_steps(model: torch.nn.Module, batch: torch.Tensor, steps: int = 5) -> float:
    """Seconds per forward+backward step, averaged over ``steps``."""
    start = time.perf_counter()
    for _ in range(steps):
        model(batch).float().sum().backward()
    return (time.perf_counter() - start) / steps


def _compare(build, shape, repeats: int) -> tuple[float, float]:
    """Best-of-``repeats`` step time on CPU and on npu, measured alternately (fair under load)."""
    torch.manual_seed(0)
    cpu_model = build()
    npu_model = copy.deepcopy(cpu_model).npu()
    cpu_batch = torch.randn(*shape)
    npu_batch = cpu_batch.npu()
    _timed_steps(cpu_model, cpu_batch, 2)
    _timed_steps(npu_model, npu_batch, 2)
    cpu = npu = float("inf")
    for _ in range(repeats):
        cpu = min(cpu, _timed_steps(cpu_model, cpu_batch))
        npu = min(npu, _timed_steps(npu_model, npu_batch))
    return cpu, npu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    emulate_npu()
    cases = {"mlp [64x256]": (_mlp, (64, 256)), "transformer block [8x64x256]": (_transformer_block, (8, 64, 256))}
    print(f"{'model':32} {'cpu ms':>9} {'npu ms':>9} {'ratio':>7}")
    for name, (build, shape) in cases.items():
        cpu, npu = _compare(build, shape, args.repeats)
        print(f"{name:32} {cpu * 1e3:9.2f} {npu * 1e3:9.2f} {npu / cpu:7.2f}")


if __name__ == "__main__":
    main()
