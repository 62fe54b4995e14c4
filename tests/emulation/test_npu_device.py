"""The emulated npu device, torch.npu and the fake torch_npu package (docs/reference/torch_npu.md §4, §5).

Everything that needs the device runs in the shared npu worker process (``in_npu_process``),
because ``emulate_npu()`` registers torch's one private-use backend for the whole process.
The first two tests run here and check that importing the package installs nothing.
"""

from __future__ import annotations

import copy
import io
import os
import subprocess
import sys

import pytest
import torch
from npu_process import REPO, in_npu_process

SAME_DEVICE = "Expected all tensors to be on the same device"


def test_importing_the_emulation_package_installs_nothing():
    import cuda2npu.emulation  # noqa: F401
    from cuda2npu.emulation import npu_attention, npu_ops, npu_optim  # noqa: F401

    assert torch._C._get_privateuse1_backend_name() == "privateuseone"
    assert "torch_npu" not in sys.modules
    assert not hasattr(torch, "npu")


def test_emulate_cuda_is_resolved_lazily():
    import cuda2npu.emulation as emulation

    assert "emulate_cuda" in emulation.__all__
    try:
        assert callable(emulation.emulate_cuda)
    except ModuleNotFoundError as error:  # cuda.py is written separately and may not exist yet
        assert error.name == "cuda2npu.emulation.cuda"
    with pytest.raises(AttributeError):
        emulation.no_such_name  # noqa: B018


# --- detection of a real torch_npu / a taken backend (each needs a fresh process) -------------

REAL_TORCH_NPU = """
import torch, types
torch.utils.rename_privateuse1_backend("npu")
torch._register_device_module("npu", types.SimpleNamespace(is_available=lambda: True))
"""
BROKEN_TORCH_NPU = "raise ImportError('libhccl.so: cannot open shared object file')\n"


def run_fresh(tmp_path, script, torch_npu_source=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    if torch_npu_source is not None:
        (tmp_path / "torch_npu").mkdir()
        (tmp_path / "torch_npu" / "__init__.py").write_text(torch_npu_source)
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)


def test_real_working_torch_npu_is_left_alone(tmp_path):
    script = (
        "import torch, torch_npu\nfrom cuda2npu.emulation import emulate_npu\n"
        "handle = emulate_npu()\nassert not handle.emulated, handle\n"
        "assert not hasattr(torch_npu, '__cuda2npu_emulated__')\nprint('ok')"
    )
    result = run_fresh(tmp_path, script, REAL_TORCH_NPU)
    assert result.stdout.strip() == "ok", result.stderr


def test_torch_npu_that_fails_before_claiming_the_backend_is_replaced(tmp_path):
    script = (
        "import torch\nfrom cuda2npu.emulation import emulate_npu\n"
        "assert emulate_npu().emulated\nimport torch_npu\n"
        "assert torch_npu.__cuda2npu_emulated__ and torch.ones(1, device='npu').is_npu\nprint('ok')"
    )
    result = run_fresh(tmp_path, script, BROKEN_TORCH_NPU)
    assert result.stdout.strip() == "ok", result.stderr


def test_a_taken_private_use_backend_is_reported(tmp_path):
    script = (
        "import torch\ntorch.utils.rename_privateuse1_backend('foo')\n"
        "from cuda2npu.emulation import emulate_npu\nemulate_npu()"
    )
    result = run_fresh(tmp_path, script)
    assert result.returncode != 0 and "already registered as 'foo'" in result.stderr


# --- torch.npu device module ----------------------------------------------------------------


@in_npu_process
def test_device_module_basics():
    assert torch.npu.is_available() and torch.npu.device_count() == 1 and torch.npu.current_device() == 0
    torch.npu.set_device(0)
    torch.npu.set_device("npu:0")
    with pytest.raises(RuntimeError, match="one device"):
        torch.npu.set_device(1)
    with torch.npu.device(0):
        torch.npu.synchronize()
    assert isinstance(torch.npu.get_device_name(0), str)
    assert torch.npu.get_device_properties(0).total_memory > 0
    assert torch.npu.is_bf16_supported()
    assert torch.npu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16, torch.float32]
    assert torch.npu.memory_allocated() == torch.npu.max_memory_allocated() == torch.npu.memory_reserved() == 0
    assert set(torch.npu.memory_stats().values()) == {0}
    free, total = torch.npu.mem_get_info()
    assert 0 < free <= total
    torch.npu.empty_cache()
    torch.npu.reset_peak_memory_stats()
    torch.npu.matmul.allow_hf32 = True
    torch.npu.conv.allow_hf32 = False
    assert torch.npu.matmul.allow_hf32 is True and torch.npu.conv.allow_hf32 is False


@in_npu_process
def test_device_functions_take_torch_npus_parameter_names():
    """Keyword calls as written against torch_npu (torch_npu/npu/utils.py, memory.py, __init__.py)."""
    torch.npu.set_device(device=0)
    torch.npu.synchronize(device=0)
    with torch.npu.device(device="npu:0"):
        pass
    assert torch.npu.get_device_name(device_name=0) == torch.npu.get_device_properties(device_name=0).name
    torch.npu.get_device_capability(device=0)
    torch.npu.mem_get_info(device=0)
    for query in (
        torch.npu.memory_allocated,
        torch.npu.max_memory_allocated,
        torch.npu.memory_reserved,
        torch.npu.max_memory_reserved,
    ):
        assert query(device=0) == 0
    torch.npu.memory_stats(device=0)
    torch.npu.memory_summary(device=0, abbreviated=True)
    torch.npu.reset_peak_memory_stats(device=0)
    side = torch.npu.Stream()
    with torch.npu.stream(stream=side):
        assert torch.npu.current_stream(device=0) is side
    torch.npu.set_stream(stream=torch.npu.default_stream(device=0))


@in_npu_process
def test_module_dtype_conversion_after_moving_to_npu():
    model = torch.nn.Linear(4, 4).npu().to(torch.bfloat16)
    x = torch.randn(2, 4).npu().to(torch.bfloat16)
    assert model(x).dtype == torch.bfloat16
    model.half()
    model.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    assert model.weight.dtype == torch.float16 and model(x.half()).dtype == torch.float16


@in_npu_process
def test_device_capability_is_none_unless_env_var_set():
    assert torch.npu.get_device_capability() is None
    os.environ["TORCH_NPU_DEVICE_CAPABILITY"] = "9.1"
    try:
        assert torch.npu.get_device_capability() == (9, 1)
    finally:
        del os.environ["TORCH_NPU_DEVICE_CAPABILITY"]


@in_npu_process
def test_streams_and_events():
    s = torch.npu.Stream(priority=-1)
    assert torch.npu.current_stream() is torch.npu.default_stream()
    with torch.npu.stream(s):
        assert torch.npu.current_stream() is s
        start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
        start.record()
        torch.ones(64, 64, device="npu").sum()
        end.record(s)
        end.synchronize()
        assert end.query() and start.elapsed_time(end) >= 0
        s.wait_event(start)
        s.wait_stream(torch.npu.default_stream())
        assert s.query()
    assert torch.npu.current_stream() is torch.npu.default_stream()
    with pytest.raises(RuntimeError, match="enable_timing"):
        torch.npu.Event().elapsed_time(torch.npu.Event())


# --- tensors on the device ------------------------------------------------------------------


@in_npu_process
def test_factories_and_transfers():
    cases = {
        "arange": (torch.arange(2, 11, 3, device="npu"), torch.arange(2, 11, 3)),
        "zeros": (torch.zeros(2, 3, device="npu"), torch.zeros(2, 3)),
        "ones": (torch.ones(4, dtype=torch.float16, device="npu"), torch.ones(4, dtype=torch.float16)),
        "full": (torch.full((2,), 7.0, device="npu"), torch.full((2,), 7.0)),
        "tensor": (torch.tensor([[1, 2], [3, 4]], device="npu"), torch.tensor([[1, 2], [3, 4]])),
        "linspace": (torch.linspace(0, 1, 5, device=torch.device("npu", 0)), torch.linspace(0, 1, 5)),
        "eye": (torch.eye(3, device="npu:0"), torch.eye(3)),
    }
    for name, (npu, cpu) in cases.items():
        assert npu.device == torch.device("npu", 0) and npu.is_npu, name
        back = npu.cpu()
        assert type(back) is torch.Tensor and back.device.type == "cpu", name
        assert torch.equal(back, cpu), name
    x = torch.randn(3, 4)
    for moved in (x.npu(), x.to("npu"), x.to(device="npu", dtype=torch.float16), x.npu(0)):
        assert moved.device.type == "npu" and torch.equal(moved.cpu(), x.to(moved.dtype))
    assert torch.equal(x.npu().to("cpu"), x) and not x.is_npu
    y = x.npu()
    assert y.tolist() == x.tolist() and y[1, 2].item() == x[1, 2].item()
    assert "device='npu:0'" in repr(y) and repr(y).startswith("tensor(")
    assert y.data_ptr() != 0
    with pytest.raises(RuntimeError, match="one device"):
        torch.zeros(2, device="npu:1")


@in_npu_process
def test_mixing_devices_raises_like_hardware():
    a = torch.randn(3, 4, device="npu")
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        a + torch.randn(3, 4)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        torch.matmul(torch.randn(2, 3), a)
    model = torch.nn.Linear(4, 2).npu()
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        model(torch.randn(5, 4))  # the classic missed .npu()
    assert (a * torch.tensor(2.0)).device.type == "npu"  # CPU scalars are fine, as on CUDA
    assert a[torch.tensor([0, 2])].shape == (2, 4)  # so are CPU index tensors
    a.copy_(torch.ones(3, 4))
    assert torch.equal(a.cpu(), torch.ones(3, 4))


@in_npu_process
def test_views_inplace_and_out_variants_keep_metadata():
    x = torch.zeros(4, 4, device="npu")
    view = x[1:3, ::2]
    assert view.shape == (2, 2) and view.stride() == (4, 2) and view.storage_offset() == 4
    view.fill_(5)
    assert x.cpu()[1].tolist() == [5, 0, 5, 0]
    y = torch.randn(2, 3, device="npu")
    y.t_()
    assert y.shape == (3, 2) and not y.is_contiguous()
    out = torch.empty(0, device="npu")
    result = torch.add(torch.ones(3, device="npu"), 1, out=out)
    assert result is out and out.shape == (3,) and out.cpu().tolist() == [2, 2, 2]
    z = torch.ones(2, device="npu")
    assert z.add_(1) is z and z.resize_(5).shape == (5,)


@in_npu_process
def test_module_npu_and_training_match_cpu():
    def build():
        return torch.nn.Sequential(
            torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 1)
        )

    torch.manual_seed(0)
    cpu_model, npu_model = build(), build()
    npu_model.load_state_dict(cpu_model.state_dict())
    assert npu_model.npu() is npu_model
    param = next(npu_model.parameters())
    assert isinstance(param, torch.nn.Parameter) and param.is_npu and param.requires_grad
    x, y = torch.randn(32, 6), torch.randn(32, 1)
    for model, xs, ys in ((cpu_model, x, y), (npu_model, x.npu(), y.npu())):
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(3):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(xs), ys).backward()
            optimizer.step()
    for a, b in zip(cpu_model.parameters(), npu_model.parameters()):
        assert b.grad.device.type == "npu"
        torch.testing.assert_close(b.detach().cpu(), a.detach(), atol=1e-6, rtol=1e-6)


# --- autocast and GradScaler ----------------------------------------------------------------


@in_npu_process
def test_autocast_follows_the_cuda_policy():
    assert torch.get_autocast_dtype("npu") == torch.float16  # PrivateUse1 default (§4.4)
    linear = torch.nn.Linear(8, 8).npu()
    x = torch.randn(4, 8, device="npu")
    with torch.autocast("npu", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("npu")
        h = linear(x)
        assert h.dtype == torch.bfloat16  # lower-precision list
        assert torch.mm(x, x.t()).dtype == torch.bfloat16
        assert torch.softmax(h, -1).dtype == torch.float32  # fp32 list
        assert torch.nn.functional.layer_norm(h, (8,)).dtype == torch.float32
        assert torch.nn.functional.mse_loss(h, x).dtype == torch.float32
        assert (h + x).dtype == torch.float32  # not listed: ordinary type promotion
        assert torch.addcmul(x, h, h).dtype == torch.float32  # promote list
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            torch.nn.functional.binary_cross_entropy(torch.sigmoid(h.float()), torch.rand(4, 8, device="npu"))
        h.float().sum().backward()
    assert linear.weight.grad.dtype == torch.float32 and linear.weight.grad.device.type == "npu"
    assert linear(x).dtype == torch.float32
    with torch.npu.amp.autocast():
        assert linear(x).dtype == torch.float16
    cpu_linear = torch.nn.Linear(8, 8)
    with torch.autocast("npu", dtype=torch.bfloat16):
        assert cpu_linear(torch.randn(2, 8)).dtype == torch.float32  # CPU tensors are not npu-autocast


@in_npu_process
def test_grad_scaler_dynamic_and_static():
    from torch_npu.npu.amp import GradScaler

    param = torch.nn.Parameter(torch.ones(3, device="npu"))
    optimizer = torch.optim.SGD([param], lr=1.0)
    scaler = GradScaler(init_scale=4.0)
    scaler.scale((param * torch.tensor([float("inf"), 1.0, 1.0], device="npu")).sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    assert scaler.get_scale() == 2.0 and torch.equal(param.detach().cpu(), torch.ones(3))  # step skipped
    optimizer.zero_grad()
    scaler.scale(param.sum()).backward()
    scaler.step(optimizer)
    assert torch.equal(param.detach().cpu(), torch.zeros(3))  # grad 1 after unscaling
    static = GradScaler(init_scale=8.0, dynamic=False)
    optimizer.zero_grad()
    static.scale((param * 3).sum()).backward()
    static.unscale_(optimizer)
    assert torch.equal(param.grad.cpu(), torch.full((3,), 3.0))
    static.step(optimizer)
    static.update()
    assert static.get_scale() == 8.0


# --- serialization --------------------------------------------------------------------------


@in_npu_process
def test_save_and_load_npu_tensors():
    model = torch.nn.Linear(3, 2).npu()
    shared = torch.arange(6.0, device="npu")
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "shared": shared, "view": shared[2:4]}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)  # weights_only=True by default
    assert loaded["model"]["weight"].device.type == "npu"
    assert torch.equal(loaded["model"]["weight"].cpu(), model.weight.detach().cpu())
    buffer.seek(0)
    on_cpu = torch.load(buffer, map_location="cpu")
    assert type(on_cpu["shared"]) is torch.Tensor and on_cpu["shared"].device.type == "cpu"


@in_npu_process
def test_load_cpu_checkpoint_with_map_location_npu():
    weight = torch.randn(4, 4)
    buffer = io.BytesIO()
    torch.save({"w": weight, "tied": weight, "row": weight[1]}, buffer)
    for kwargs in ({"map_location": "npu"}, {"map_location": torch.device("npu:0"), "weights_only": False}):
        buffer.seek(0)
        loaded = torch.load(buffer, **kwargs)
        assert loaded["w"].device.type == "npu" and torch.equal(loaded["w"].cpu(), weight)
        assert loaded["row"].shape == (4,) and torch.equal(loaded["row"].cpu(), weight[1])
        loaded["w"].add_(1)
        assert torch.equal(loaded["tied"].cpu(), weight + 1)  # storage sharing preserved
    buffer.seek(0)
    with pytest.raises(RuntimeError, match="npu:1"):
        torch.load(buffer, map_location="npu:1")


# --- randomness, generators, pinned memory --------------------------------------------------


@in_npu_process
def test_seeds_and_rng_state():
    torch.manual_seed(7)
    a = torch.randn(5, device="npu").cpu()
    torch.manual_seed(7)
    b = torch.randn(5, device="npu").cpu()
    assert torch.equal(a, b)  # torch.manual_seed reaches npu via manual_seed_all, no recursion
    torch.npu.manual_seed(3)
    cpu_state = torch.get_rng_state()
    first = torch.rand(4, device="npu").cpu()
    assert torch.equal(torch.get_rng_state(), cpu_state)  # npu draws use the npu generator
    torch.npu.manual_seed_all(3)
    assert torch.equal(torch.rand(4, device="npu").cpu(), first)
    state = torch.npu.get_rng_state()
    drop1 = torch.nn.functional.dropout(torch.ones(100, device="npu"), 0.5).cpu()
    torch.npu.set_rng_state(state)
    drop2 = torch.nn.functional.dropout(torch.ones(100, device="npu"), 0.5).cpu()
    assert torch.equal(drop1, drop2) and set(drop1.unique().tolist()) <= {0.0, 2.0}
    assert torch.npu.initial_seed() == 3


@in_npu_process
def test_generator_and_pin_memory():
    g = torch.Generator(device="npu")
    g.manual_seed(11)
    a = torch.randn(3, device="npu", generator=g).cpu()
    g.manual_seed(11)
    assert torch.equal(torch.randn(3, device="npu", generator=g).cpu(), a)
    assert isinstance(g, torch.Generator) and isinstance(torch.default_generator, torch.Generator)
    assert torch.Generator().device.type == "cpu"
    x = torch.randn(4)
    pinned = x.pin_memory()
    assert torch.equal(pinned, x) and pinned is not x
    dataset = torch.utils.data.TensorDataset(torch.randn(6, 2))
    loader = torch.utils.data.DataLoader(dataset, batch_size=3, pin_memory=True)
    batches = [batch[0].npu(non_blocking=True) for batch in loader]
    assert len(batches) == 2 and batches[0].is_npu


# --- the fake torch_npu package -------------------------------------------------------------


@in_npu_process
def test_fake_torch_npu_package():
    import torch_npu
    import torch_npu.optim
    from torch.npu.amp import autocast
    from torch_npu.npu.amp import GradScaler  # noqa: F401

    assert torch_npu.npu is torch.npu and torch_npu.optim.NpuFusedAdamW is not None
    assert issubclass(autocast, torch.amp.autocast)
    assert torch_npu.__version__.endswith("+cuda2npu.emulated")
    with pytest.raises(ModuleNotFoundError, match="not provided"):
        import torch_npu.contrib.transfer_to_npu  # noqa: F401
    with pytest.raises(AttributeError, match="not provided"):
        torch_npu.optim.ZeroRedundancyOptimizer  # does not exist in torch_npu (§3)


@in_npu_process
def test_emulate_npu_is_idempotent_and_context_exit_removes_the_fake_package():
    from cuda2npu.emulation import emulate_npu, npu_patches

    handle = emulate_npu()
    assert handle.emulated and emulate_npu().emulated
    with emulate_npu():
        pass
    assert "torch_npu" in sys.modules  # the worker's own install is untouched
    for name in [n for n in sys.modules if n.startswith("torch_npu")]:
        del sys.modules[name]
    npu_patches.remove_patches()
    try:
        with emulate_npu() as emulation:
            import torch_npu  # noqa: F401

            assert emulation.emulated and torch.Generator(device="npu") is not None
        assert "torch_npu" not in sys.modules
        with pytest.raises(ModuleNotFoundError):
            import torch_npu  # noqa: F401, F811
        with pytest.raises(NotImplementedError):
            torch.Generator(device="npu")
        assert torch.ones(1, device="npu").is_npu  # the device itself stays
    finally:
        emulate_npu()
    assert "torch_npu" in sys.modules


@in_npu_process
def test_recurrent_layers_match_cpu_in_outputs_and_gradients():
    """LSTM/GRU/cells reach aten::_thnn_fused_*_cell on a non-CPU device; CPU's own RNN kernels
    (a separate implementation) are the reference."""
    torch.manual_seed(0)
    for layer, x in (
        (torch.nn.LSTM(4, 6, num_layers=2, batch_first=True), torch.randn(2, 3, 4)),
        (torch.nn.GRU(4, 6, bidirectional=True), torch.randn(3, 2, 4)),
        (torch.nn.LSTMCell(4, 6), torch.randn(2, 4)),
        (torch.nn.GRUCell(4, 6), torch.randn(2, 4)),
    ):
        on_npu = copy.deepcopy(layer).npu()
        expected = layer(x)
        got = on_npu(x.npu())
        first = lambda out: out[0] if isinstance(out, tuple) else out  # noqa: E731
        torch.testing.assert_close(first(got).cpu(), first(expected), atol=1e-5, rtol=1e-5)
        first(expected).pow(2).sum().backward()
        first(got).pow(2).sum().backward()
        for (name, p_cpu), p_npu in zip(layer.named_parameters(), on_npu.parameters()):
            torch.testing.assert_close(p_npu.grad.cpu(), p_cpu.grad, atol=1e-5, rtol=1e-5, msg=name)


@in_npu_process
def test_load_state_dict_into_an_lstm_on_npu():
    source = torch.nn.LSTM(4, 6)
    target = torch.nn.LSTM(4, 6).npu()
    target.load_state_dict(source.state_dict())
    x = torch.randn(3, 2, 4)
    torch.testing.assert_close(target(x.npu())[0].cpu(), source(x)[0])


@in_npu_process
def test_torch_accelerator_is_the_npu():
    assert torch.accelerator.current_accelerator() == torch.device("npu")
    assert torch.accelerator.device_count() == 1 and torch.accelerator.current_device_index() == 0
    torch.accelerator.synchronize()
    x = torch.ones(3, device=torch.accelerator.current_accelerator())
    assert x.device.type == "npu"
    assert torch.accelerator.memory_allocated() == torch.npu.memory_allocated()
    assert torch.accelerator.get_memory_info()[1] > 0
    torch.accelerator.empty_cache()


@in_npu_process
def test_data_parallel_over_the_one_device_runs_the_module():
    model = torch.nn.Linear(3, 2).npu()
    x = torch.randn(4, 3).npu()
    torch.testing.assert_close(torch.nn.DataParallel(model)(x).cpu(), model(x).cpu())
