"""``emulate_cuda()``: CUDA device arguments run on the CPU, torch.cuda/autocast/GradScaler are
mapped, stand-ins import only when the real package is missing, and everything is restored
when the handle closes (each test uses the context manager, so no patch leaks)."""

from __future__ import annotations

import importlib
import io
import sys

import pytest
import torch

from cuda2npu.emulation.cuda import emulate_cuda, to_cpu_device


def test_factories_and_moves_land_on_cpu():
    with emulate_cuda():
        tensors = [
            torch.zeros(2, device="cuda"),
            torch.ones(2, device="cuda:0"),
            torch.empty(2, device=0),
            torch.randn(2, device=torch.device("cuda")),
            torch.rand(2, device="cuda"),
            torch.full((2,), 3.0, device="cuda"),
            torch.arange(4, device="cuda"),
            torch.tensor([1.0, 2.0], device="cuda"),
            torch.linspace(0, 1, 3, device="cuda"),
            torch.eye(2, device="cuda"),
            torch.randint(0, 5, (3,), device="cuda"),
            torch.zeros_like(torch.ones(2), device="cuda"),
            torch.ones(1).new_zeros(3, device="cuda"),
        ]
        moved = [
            torch.ones(2).cuda(),
            torch.ones(2).cuda(0),
            torch.ones(2).to("cuda"),
            torch.ones(2).to(torch.device("cuda", 0), torch.float16),
            torch.ones(2).to(device="cuda"),
            torch.ones(2).type("torch.cuda.HalfTensor"),
            torch.ones(2).pin_memory(),
        ]
        model = torch.nn.Linear(3, 2).cuda()
        model.to("cuda:0")
        out = model(torch.randn(4, 3, device="cuda"))
    assert all(t.device.type == "cpu" for t in tensors + moved + [out])
    assert torch.arange(4).tolist() == tensors[6].tolist()
    assert moved[3].dtype == torch.float16 and moved[5].dtype == torch.float16
    assert not out.is_cuda  # documented: tensors are plain CPU tensors
    assert all(p.device.type == "cpu" for p in model.parameters())


def test_only_device_zero_exists():
    with emulate_cuda():
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            torch.zeros(1, device="cuda:1")
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            torch.cuda.set_device(1)
    assert to_cpu_device("cpu") == "cpu" and to_cpu_device(torch.float16) is torch.float16


def test_torch_cuda_api():
    with emulate_cuda():
        assert torch.cuda.is_available() and torch.cuda.device_count() == 1
        assert torch.cuda.current_device() == 0
        torch.cuda.set_device(0)
        torch.cuda.synchronize()
        with torch.cuda.device(0):
            pass
        assert torch.cuda.is_bf16_supported()
        torch.cuda.manual_seed_all(123)
        first = torch.randn(3, device="cuda")
        torch.cuda.manual_seed(123)
        assert torch.equal(torch.randn(3, device="cuda"), first)
        state = torch.cuda.get_rng_state()
        again = torch.rand(2, device="cuda")
        torch.cuda.set_rng_state(state)
        assert torch.equal(torch.rand(2, device="cuda"), again)
        torch.manual_seed(5)  # calls the patched torch.cuda.manual_seed_all without recursing
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cuda.matmul.allow_tf32 = False
    assert not torch.cuda.is_available()


def test_torch_accelerator_answers_cuda_to_the_program_and_optimizers_still_step():
    """The program sees the one emulated CUDA device; torch's own checks (Adam's graph-capture
    test) keep the CPU answer, so optimizers still step."""
    with emulate_cuda():
        device = torch.accelerator.current_accelerator()
        assert device == torch.device("cuda")
        model = torch.nn.Linear(2, 2).to(device)
        model(torch.ones(1, 2, device="cuda")).sum().backward()
        torch.optim.Adam(model.parameters()).step()


@pytest.mark.filterwarnings("ignore:`torch.cuda.amp:FutureWarning")
def test_autocast_and_grad_scaler_map_to_cpu():
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with emulate_cuda():
        with torch.autocast("cuda"):
            assert (a @ b).dtype == torch.float16
            assert torch.is_autocast_enabled() and torch.get_autocast_gpu_dtype() == torch.float16
        with torch.cuda.amp.autocast(dtype=torch.bfloat16):
            assert (a @ b).dtype == torch.bfloat16
        with torch.amp.autocast("cuda", enabled=False):
            assert (a @ b).dtype == torch.float32

        class Scale(torch.autograd.Function):
            @staticmethod
            @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
            def forward(ctx, x):
                return x * 2

            @staticmethod
            @torch.amp.custom_bwd(device_type="cuda")
            def backward(ctx, grad):
                return grad * 2

        with torch.autocast("cuda"):
            assert Scale.apply(torch.ones(2, dtype=torch.float16)).dtype == torch.float32

        model = torch.nn.Linear(4, 1).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.cuda.amp.GradScaler(init_scale=1024.0)
        assert scaler.is_enabled()
        loss = model(torch.randn(8, 4, device="cuda")).pow(2).mean()
        scaled = scaler.scale(loss)
        torch.testing.assert_close(scaled, loss * 1024.0)
        scaled.backward()
        scaler.step(opt)
        scaler.update()
        assert scaler.get_scale() == 1024.0
        assert torch.amp.GradScaler("cuda").is_enabled()


def test_torch_load_maps_every_location_to_cpu():
    buffer = io.BytesIO()
    torch.save({"w": torch.arange(3.0)}, buffer)
    with emulate_cuda():
        for location in (
            None,
            "cuda",
            "cuda:0",
            torch.device("cuda"),
            {"cuda:1": "cuda:0"},
            lambda storage, loc: storage.cuda(),
        ):
            buffer.seek(0)
            loaded = torch.load(buffer, map_location=location) if location is not None else torch.load(buffer)
            assert loaded["w"].device.type == "cpu" and loaded["w"].tolist() == [0.0, 1.0, 2.0]


def test_standins_resolve_only_while_active_and_only_when_missing(tmp_path, monkeypatch):
    if any(importlib.util.find_spec(name) for name in ("flash_attn", "apex", "transformer_engine")):
        pytest.skip("a real flash_attn/apex/transformer_engine is installed")
    with emulate_cuda():
        import transformer_engine.pytorch as te
        from apex import amp  # noqa: F401
        from apex.optimizers import FusedAdam  # noqa: F401
        from flash_attn import flash_attn_func  # noqa: F401
        from flash_attn.flash_attn_interface import flash_attn_varlen_func  # noqa: F401
        from transformer_engine.common import recipe  # noqa: F401

        assert te.Linear.__module__ == "transformer_engine.pytorch.module.linear"
        import amp_C  # noqa: F401
        from apex.multi_tensor_apply import multi_tensor_applier  # noqa: F401

        with pytest.raises(ImportError):
            import fused_layer_norm_cuda  # noqa: F401
    assert (
        "flash_attn" not in sys.modules
        and "amp_C" not in sys.modules
        and "transformer_engine.pytorch" not in sys.modules
    )
    with pytest.raises(ImportError):
        import flash_attn  # noqa: F401

    (tmp_path / "flash_attn").mkdir()
    (tmp_path / "flash_attn" / "__init__.py").write_text("REAL = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with emulate_cuda():
        import flash_attn as real

        assert real.REAL
    sys.modules.pop("flash_attn", None)


def test_nested_activations_and_restore():
    original_load, original_init = torch.load, torch.amp.autocast_mode.autocast.__init__
    outer = emulate_cuda()
    with emulate_cuda():
        assert torch.cuda.is_available()
    assert torch.cuda.is_available() and torch.zeros(1, device="cuda").device.type == "cpu"
    outer.close()
    outer.close()
    assert not torch.cuda.is_available()
    assert torch.load is original_load and torch.amp.autocast_mode.autocast.__init__ is original_init
    assert "__enter__" in vars(torch.cuda.device)
    with pytest.raises((RuntimeError, AssertionError)):
        torch.zeros(1, device="cuda")


def test_the_emulated_device_answers_queries_as_an_80_gib_sm80_gpu():
    from cuda2npu.emulation.controls import device_type

    with emulate_cuda():
        assert torch.cuda.get_device_capability() == (8, 0) and torch.cuda.get_device_capability(0) == (8, 0)
        properties = torch.cuda.get_device_properties(0)
        assert properties.total_memory == 80 * 2**30 and (properties.major, properties.minor) == (8, 0)
        assert torch.cuda.mem_get_info() == (80 * 2**30, 80 * 2**30)
        assert torch.cuda.memory_stats()["active_bytes.all.peak"] == 0
        torch.cuda.reset_peak_memory_stats()
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            torch.cuda.get_device_properties(1)
        assert torch.device(0) == torch.device("cuda", 0)
        assert device_type(torch.nn.Linear(2, 2).cuda().weight) == "cuda"
    with pytest.raises(RuntimeError):
        torch.device(0)  # a CPU build has no accelerator to index


def test_threads_started_under_the_emulation_map_cuda_too():
    import threading

    results = []

    def work():
        results.append(torch.ones(2, device="cuda").to(device=0).device)

    with emulate_cuda():
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    assert results == [torch.device("cpu")]
    assert threading.Thread.run is not None and "emulation" not in (threading.Thread.run.__doc__ or "")
