"""Issue 12, class 6 for TransformerEngine: what a rewrite replaces, the code around it still works.

* A deferred-initialisation loop (``isinstance(m, TransformerEngineBaseModule): m.reset_parameters()``)
  is migrated with the modules: the migrated project, run under the NPU emulator, materialises the
  generated modules' meta parameters on the npu device with TE's initial values.
* ``te.checkpoint`` in TE < 1.5's positional form keeps the function's inputs: the migrated call
  computes what the function computes, with the same gradients.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from cli_helpers import REPO, cuda2npu

MODEL = textwrap.dedent(
    """
    import torch
    import transformer_engine.pytorch as te
    from transformer_engine.pytorch.module.base import TransformerEngineBaseModule


    class Block(torch.nn.Module):
        def __init__(self, device):
            super().__init__()
            self.mlp = te.LayerNormMLP(8, 16, activation="swiglu", device=device)
            self.proj = te.Linear(8, 8, return_bias=True, device=device)


    def build():
        model = torch.nn.Sequential(Block("meta"), Block("meta"))
        for module in model.modules():
            if isinstance(module, TransformerEngineBaseModule):
                module.reset_parameters(defer_init=False)
        return model
    """
)

RUN = textwrap.dedent(
    """
    import sys
    import torch
    from cuda2npu.emulation import emulate_npu

    emulate_npu()
    sys.path.insert(0, sys.argv[1])
    import model

    built = model.build()
    params = dict(built.named_parameters())
    assert all(p.device.type == "npu" for p in params.values()), {n: p.device for n, p in params.items()}
    block = built[0]
    assert torch.equal(block.mlp.layer_norm_weight.cpu(), torch.ones(8))
    assert torch.equal(block.proj.bias.cpu(), torch.zeros(8))
    assert 0.01 < float(block.mlp.fc1_weight.detach().cpu().std()) < 0.04  # TE's normal(0, 0.023)
    out, bias = block.proj(block.mlp(torch.randn(3, 8, device="npu")))
    print("ok", tuple(out.shape))
    """
)


def test_deferred_initialisation_loop_materialises_the_generated_modules(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "model.py").write_text(MODEL, encoding="utf-8")
    done = cuda2npu("migrate", ".", cwd=root)
    assert done.returncode == 0, done.stderr
    migrated = (root / "model.py").read_text(encoding="utf-8")
    assert "isinstance(module, te_npu_modules.TEModule)" in migrated
    assert "transformer_engine" not in migrated
    runner = tmp_path / "run.py"
    runner.write_text(RUN, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, str(runner), str(root)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "ok (3, 8)"


LEGACY = textwrap.dedent(
    """
    import torch
    import transformer_engine.pytorch as te


    def get_rng_tracker():
        raise AssertionError("TE's tracker is not used after the migration")


    def recompute(block, hidden, mask):
        return te.checkpoint(block, False, get_rng_tracker, None, hidden, mask)
    """
)


def test_legacy_checkpoint_form_passes_only_the_inputs(tmp_path):
    import torch

    path = tmp_path / "legacy.py"
    path.write_text(LEGACY, encoding="utf-8")
    done = cuda2npu("migrate", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    migrated = path.read_text(encoding="utf-8")
    assert "torch.utils.checkpoint.checkpoint(block, hidden, mask, use_reentrant=True)" in migrated
    namespace: dict = {}
    exec(compile(migrated.replace("import torch_npu\n", ""), str(path), "exec"), namespace)

    linear = torch.nn.Linear(4, 4)

    def block(x, m):
        return torch.tanh(linear(x)) * m

    x = torch.randn(3, 4, requires_grad=True)
    mask = torch.rand(3, 4)
    namespace["recompute"](block, x, mask).sum().backward()
    expected_grad, x.grad = x.grad, None
    block(x, mask).sum().backward()
    assert torch.allclose(x.grad, expected_grad)
