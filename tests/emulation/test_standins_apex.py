"""The apex stand-in against formulas written out in float64 (Adam/AdamW from the paper,
LAMB with apex's clipping and trust ratio, SGD), F.layer_norm, and apex amp's documented
loss-scaling behaviour."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from cuda2npu.emulation.standins.apex import amp
from cuda2npu.emulation.standins.apex.amp._amp_state import _amp_state
from cuda2npu.emulation.standins.apex.amp.scaler import LossScaler
from cuda2npu.emulation.standins.apex.normalization import (
    FusedLayerNorm,
    FusedRMSNorm,
    MixedFusedLayerNorm,
    fused_layer_norm_affine,
    fused_rms_norm_affine,
)
from cuda2npu.emulation.standins.apex.optimizers import FusedAdam, FusedLAMB, FusedSGD
from cuda2npu.emulation.standins.apex.parallel import (
    DistributedDataParallel,
    SyncBatchNorm,
    convert_syncbn_model,
)


@pytest.fixture(autouse=True)
def fresh_amp_state():
    yield
    for name in ("opt_properties", "loss_scalers"):
        if hasattr(_amp_state, name):
            delattr(_amp_state, name)
    _amp_state.casts_active = False


def _params_and_grads(seed=0, steps=4):
    gen = torch.Generator().manual_seed(seed)
    params = [torch.randn(5, 3, generator=gen), torch.randn(7, generator=gen)]
    grads = [[torch.randn(p.shape, generator=gen) for p in params] for _ in range(steps)]
    return params, grads


def _run(optimizer_cls, params, grads, **kwargs):
    params = [torch.nn.Parameter(p.clone()) for p in params]
    opt = optimizer_cls(params, **kwargs)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = g.clone()
        opt.step()
    return params, opt


def _adam_reference(params, grads, lr, betas, eps, wd, decoupled, bias_correction=True):
    out = []
    for i, p0 in enumerate(params):
        p, m, v = (
            p0.double().clone(),
            torch.zeros_like(p0, dtype=torch.float64),
            torch.zeros_like(p0, dtype=torch.float64),
        )
        for t, step_grads in enumerate(grads, start=1):
            g = step_grads[i].double()
            if not decoupled:
                g = g + wd * p
            m = betas[0] * m + (1 - betas[0]) * g
            v = betas[1] * v + (1 - betas[1]) * g * g
            bc1 = 1 - betas[0] ** t if bias_correction else 1.0
            bc2 = 1 - betas[1] ** t if bias_correction else 1.0
            update = (m / bc1) / (torch.sqrt(v / bc2) + eps)
            if decoupled:
                update = update + wd * p
            p = p - lr * update
        out.append(p)
    return out


@pytest.mark.parametrize("bias_correction", [True, False])
def test_fused_adam_default_is_adamw(bias_correction):
    params, grads = _params_and_grads()
    mine, opt = _run(FusedAdam, params, grads, lr=0.01, weight_decay=0.1, bias_correction=bias_correction)
    adamw = _adam_reference(params, grads, 0.01, (0.9, 0.999), 1e-8, 0.1, True, bias_correction)
    adam_l2 = _adam_reference(params, grads, 0.01, (0.9, 0.999), 1e-8, 0.1, False, bias_correction)
    for p, ref_w, ref_l2 in zip(mine, adamw, adam_l2):
        torch.testing.assert_close(p.double(), ref_w, atol=1e-6, rtol=1e-6)
        assert not torch.allclose(p.double(), ref_l2, atol=1e-4)
    assert opt.state_dict()["param_groups"][0]["step"] == len(grads)


def test_fused_adam_l2_mode():
    params, grads = _params_and_grads(seed=1)
    mine, _ = _run(FusedAdam, params, grads, lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05, adam_w_mode=False)
    for p, ref in zip(mine, _adam_reference(params, grads, 0.02, (0.8, 0.99), 1e-6, 0.05, False)):
        torch.testing.assert_close(p.double(), ref, atol=1e-6, rtol=1e-6)


def test_fused_adam_rejects_amsgrad_and_zero_grad_drops_grads():
    p = torch.nn.Parameter(torch.ones(2))
    with pytest.raises(RuntimeError, match="AMSGrad"):
        FusedAdam([p], amsgrad=True)
    opt = FusedAdam([p])
    p.grad = torch.ones(2)
    opt.zero_grad()
    assert p.grad is None


def _lamb_reference(
    params, grads, lr, betas, eps, wd, max_grad_norm, grad_averaging=True, use_nvlamb=False, decoupled=True
):
    ps = [p.double().clone() for p in params]
    ms = [torch.zeros_like(p) for p in ps]
    vs = [torch.zeros_like(p) for p in ps]
    for t, step_grads in enumerate(grads, start=1):
        gs = [g.double() for g in step_grads]
        norm = math.sqrt(sum(float((g * g).sum()) for g in gs))
        clip = norm / max_grad_norm if norm > max_grad_norm else 1.0
        beta3 = 1 - betas[0] if grad_averaging else 1.0
        for i in range(len(ps)):
            g = gs[i] / clip
            if not decoupled:
                g = g + wd * ps[i]
            ms[i] = betas[0] * ms[i] + beta3 * g
            vs[i] = betas[1] * vs[i] + (1 - betas[1]) * g * g
            update = (ms[i] / (1 - betas[0] ** t)) / (torch.sqrt(vs[i] / (1 - betas[1] ** t)) + eps)
            if decoupled:
                update = update + wd * ps[i]
            p_norm, u_norm = float(ps[i].norm()), float(update.norm())
            trust = p_norm / u_norm if (use_nvlamb or wd != 0) and p_norm > 0 and u_norm > 0 else 1.0
            ps[i] = ps[i] - lr * trust * update
    return ps


@pytest.mark.parametrize("weight_decay,use_nvlamb", [(0.01, False), (0.0, False), (0.0, True)])
@pytest.mark.parametrize("max_grad_norm", [1.0, 100.0])
def test_fused_lamb_trust_ratio_and_clipping(weight_decay, use_nvlamb, max_grad_norm):
    params, grads = _params_and_grads(seed=2, steps=3)
    mine, _ = _run(
        FusedLAMB, params, grads, lr=0.05, weight_decay=weight_decay, use_nvlamb=use_nvlamb, max_grad_norm=max_grad_norm
    )
    expected = _lamb_reference(
        params, grads, 0.05, (0.9, 0.999), 1e-6, weight_decay, max_grad_norm, use_nvlamb=use_nvlamb
    )
    for p, ref in zip(mine, expected):
        torch.testing.assert_close(p.double(), ref, atol=1e-5, rtol=1e-5)


def test_fused_lamb_l2_mode_without_grad_averaging_and_update_in_grad():
    params, grads = _params_and_grads(seed=3, steps=2)
    mine, opt = _run(FusedLAMB, params, grads, lr=0.05, weight_decay=0.02, adam_w_mode=False, grad_averaging=False)
    expected = _lamb_reference(
        params, grads, 0.05, (0.9, 0.999), 1e-6, 0.02, 1.0, grad_averaging=False, decoupled=False
    )
    for p, ref in zip(mine, expected):
        torch.testing.assert_close(p.double(), ref, atol=1e-5, rtol=1e-5)
    state = opt.state[mine[0]]
    expected_update = (state["exp_avg"] / (1 - 0.9**2)) / ((state["exp_avg_sq"] / (1 - 0.999**2)).sqrt() + 1e-6)
    torch.testing.assert_close(mine[0].grad, expected_update)


def _sgd_reference(params, grads, lr, momentum, dampening, wd, nesterov, wd_after):
    out = []
    for i, p0 in enumerate(params):
        p, buf = p0.double().clone(), None
        for step_grads in grads:
            g = step_grads[i].double()
            if wd and not wd_after:
                g = g + wd * p
            if momentum:
                buf = g.clone() if buf is None else momentum * buf + (1 - dampening) * g
                g = g + momentum * buf if nesterov else buf
            if wd and wd_after:
                g = g + wd * p
            p = p - lr * g
        out.append(p)
    return out


@pytest.mark.parametrize(
    "momentum,dampening,nesterov,wd_after",
    [(0.0, 0.0, False, False), (0.9, 0.0, False, False), (0.9, 0.0, True, False), (0.8, 0.3, False, True)],
)
def test_fused_sgd(momentum, dampening, nesterov, wd_after):
    params, grads = _params_and_grads(seed=4)
    mine, _ = _run(
        FusedSGD,
        params,
        grads,
        lr=0.1,
        momentum=momentum,
        dampening=dampening,
        weight_decay=0.01,
        nesterov=nesterov,
        wd_after_momentum=wd_after,
    )
    for p, ref in zip(mine, _sgd_reference(params, grads, 0.1, momentum, dampening, 0.01, nesterov, wd_after)):
        torch.testing.assert_close(p.double(), ref, atol=1e-6, rtol=1e-6)
    if not wd_after:
        torch_params, _ = _run(
            torch.optim.SGD,
            params,
            grads,
            lr=0.1,
            momentum=momentum,
            dampening=dampening,
            weight_decay=0.01,
            nesterov=nesterov,
        )
        for p, q in zip(mine, torch_params):
            torch.testing.assert_close(p, q)


def test_fused_sgd_skips_bf16_params_like_apex():
    p = torch.nn.Parameter(torch.ones(3, dtype=torch.bfloat16))
    p.grad = torch.ones(3, dtype=torch.bfloat16)
    FusedSGD([p], lr=1.0).step()
    assert torch.equal(p.detach(), torch.ones(3, dtype=torch.bfloat16))


@pytest.mark.parametrize("shape,normalized", [((4, 10), (10,)), ((2, 3, 4, 5), (4, 5))])
def test_fused_layer_norm_matches_f_layer_norm(shape, normalized):
    x = torch.randn(shape) * 3 + 1
    ln = FusedLayerNorm(normalized, eps=1e-5)
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    expected = F.layer_norm(x.double(), normalized, ln.weight.double(), ln.bias.double(), 1e-5)
    torch.testing.assert_close(ln(x).double(), expected, atol=1e-5, rtol=1e-5)
    assert [n for n, _ in ln.named_parameters()] == ["weight", "bias"]
    out16 = ln(x.bfloat16())
    assert out16.dtype == torch.bfloat16


def test_fused_rms_norm_formula_and_functional_eps_default():
    x = torch.randn(3, 8)
    weight = torch.randn(8)
    expected = x.double() / torch.sqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6) * weight.double()
    torch.testing.assert_close(fused_rms_norm_affine(x, weight, (8,)).double(), expected, atol=1e-6, rtol=1e-5)
    norm = FusedRMSNorm(8)
    assert [n for n, _ in norm.named_parameters()] == ["weight"]
    unit = x.double() / torch.sqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-5)
    torch.testing.assert_close(norm(x).double(), unit, atol=1e-6, rtol=1e-5)


def test_norm_autocast_cast_and_mixed_output_dtype():
    x = torch.randn(2, 6)
    weight, bias = torch.randn(6), torch.randn(6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fused_layer_norm_affine(x, weight, bias, (6,))
    assert out.dtype == torch.bfloat16
    expected = F.layer_norm(x.bfloat16().double(), (6,), weight.bfloat16().double(), bias.bfloat16().double(), 1e-6)
    torch.testing.assert_close(out.double(), expected, atol=2e-2, rtol=2e-2)
    assert MixedFusedLayerNorm(6)(x.bfloat16()).dtype == torch.float32


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_initialize_returns_given_structure():
    m1, m2 = _model(), _model(1)
    o1, o2 = torch.optim.SGD(m1.parameters(), lr=0.1), torch.optim.SGD(m2.parameters(), lr=0.1)
    models, opts = amp.initialize([m1, m2], [o1, o2], opt_level="O0", verbosity=0)
    assert models == [m1, m2] and opts == [o1, o2]
    assert amp.initialize(_model(), opt_level="O0") is not None
    model, opt = amp.initialize(_model(), torch.optim.SGD(_model().parameters(), lr=0.1), enabled=False)
    assert isinstance(model, torch.nn.Module) and isinstance(opt, torch.optim.SGD)
    with pytest.raises(RuntimeError, match="Unexpected optimization level"):
        amp.initialize(_model(), opt_level="O4")
    with pytest.raises(RuntimeError, match="O1 inserts casts"):
        amp.initialize(_model(), opt_level="O1", cast_model_type=torch.float16)


def test_o0_training_equals_plain_training():
    x, y = torch.randn(16, 4), torch.randn(16, 2)
    plain, amped = _model(), _model()
    plain_opt = torch.optim.SGD(plain.parameters(), lr=0.1)
    amped, amp_opt = amp.initialize(amped, torch.optim.SGD(amped.parameters(), lr=0.1), opt_level="O0")
    for _ in range(3):
        for model, opt, scaled in ((plain, plain_opt, False), (amped, amp_opt, True)):
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            if scaled:
                with amp.scale_loss(loss, opt) as scaled_loss:
                    scaled_loss.backward()
            else:
                loss.backward()
            opt.step()
    for p, q in zip(plain.parameters(), amped.parameters()):
        torch.testing.assert_close(p, q)


def test_o1_dynamic_scaling_unscales_and_skips_overflow():
    x, y = torch.randn(16, 4), torch.randn(16, 2)
    model = _model()
    reference_model = _model()
    model, opt = amp.initialize(model, torch.optim.SGD(model.parameters(), lr=0.1), opt_level="O1")
    loss = F.mse_loss(model(x).float(), y)
    with amp.scale_loss(loss, opt) as scaled_loss:
        torch.testing.assert_close(scaled_loss, loss.float() * 2.0**16)
        scaled_loss.backward()
    with torch.autocast("cpu", dtype=torch.float16):
        ref_out = reference_model(x)
    F.mse_loss(ref_out.float(), y).backward()
    for p, q in zip(model.parameters(), reference_model.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-3, rtol=1e-2)
    opt.step()

    before = [p.detach().clone() for p in model.parameters()]
    opt.zero_grad()
    loss = F.mse_loss(model(x).float(), y)
    with amp.scale_loss(loss, opt) as scaled_loss:
        scaled_loss.backward()
        next(model.parameters()).grad[0, 0] = float("inf")
    assert amp.state_dict()["loss_scaler0"] == {"loss_scale": 2.0**15, "unskipped": 0}
    opt.step()
    for p, b in zip(model.parameters(), before):
        assert torch.equal(p.detach(), b)
    opt.zero_grad()
    with amp.scale_loss(F.mse_loss(model(x).float(), y), opt) as scaled_loss:
        scaled_loss.backward()
    opt.step()
    assert any(not torch.equal(p.detach(), b) for p, b in zip(model.parameters(), before))


def test_gradient_accumulation_adds_unscaled_grads():
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    model, reference_model = _model(), _model()
    model, opt = amp.initialize(model, torch.optim.SGD(model.parameters(), lr=0.1), opt_level="O0", loss_scale=128.0)
    for half in (slice(0, 4), slice(4, 8)):
        with amp.scale_loss(F.mse_loss(model(x[half]), y[half]), opt) as scaled_loss:
            scaled_loss.backward()
        F.mse_loss(reference_model(x[half]), y[half]).backward()
    for p, q in zip(model.parameters(), reference_model.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


def test_o2_master_weights():
    model = _model()
    model, opt = amp.initialize(model, torch.optim.SGD(model.parameters(), lr=0.1), opt_level="O2")
    assert model[0].weight.dtype == torch.float16 and model[1].weight.dtype == torch.float32
    out = model(torch.randn(8, 4))
    assert out.dtype == torch.float32
    with amp.scale_loss(out.pow(2).mean(), opt) as scaled_loss:
        scaled_loss.backward()
    opt.step()
    masters = list(amp.master_params(opt))
    assert all(p.dtype == torch.float32 for p in masters)
    torch.testing.assert_close(model[0].weight, masters[0].half())


def test_loss_scaler_window_growth_and_bounds():
    scaler = LossScaler("dynamic", scale_window=3, max_loss_scale=2.0**17, min_loss_scale=2.0**15)
    for _ in range(3):
        assert scaler.update_scale() is False
    assert scaler.loss_scale() == 2.0**17
    for _ in range(3):
        scaler.update_scale()
    assert scaler.loss_scale() == 2.0**17
    for _ in range(4):
        scaler._has_overflow = True
        assert scaler.update_scale() is True
    assert scaler.loss_scale() == 2.0**15


def test_amp_state_dict_roundtrip_and_cast_decorators():
    model, opt = amp.initialize(_model(), torch.optim.SGD(_model().parameters(), lr=0.1), opt_level="O1", num_losses=2)
    amp.load_state_dict(
        {"loss_scaler0": {"loss_scale": 8.0, "unskipped": 3}, "loss_scaler1": {"loss_scale": 4.0, "unskipped": 1}}
    )
    assert amp.state_dict()["loss_scaler1"] == {"loss_scale": 4.0, "unskipped": 1}
    half_identity = amp.half_function(lambda t: t)
    assert half_identity(torch.ones(2)).dtype == torch.float16
    with amp.disable_casts():
        assert half_identity(torch.ones(2)).dtype == torch.float32
    assert amp.float_function(lambda t: t)(torch.ones(2, dtype=torch.float16)).dtype == torch.float32
    promoted = amp.promote_function(lambda a, b: a + b)(torch.ones(2, dtype=torch.float16), torch.ones(2))
    assert promoted.dtype == torch.float32


def test_ddp_single_process_and_syncbn_conversion():
    model = _model()
    wrapped = DistributedDataParallel(model)
    x = torch.randn(6, 4)
    torch.testing.assert_close(wrapped(x), model(x))
    assert all(key.startswith("module.") for key in wrapped.state_dict())
    bn_model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4))
    keys = list(bn_model.state_dict())
    converted = convert_syncbn_model(bn_model)
    assert isinstance(converted[1], SyncBatchNorm) and list(converted.state_dict()) == keys
    x = torch.randn(2, 3, 5, 5)
    reference = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4))
    reference.load_state_dict(bn_model.state_dict())
    torch.testing.assert_close(converted(x), reference(x))
    channel_last = SyncBatchNorm(4, channel_last=True, fuse_relu=True)
    x = torch.randn(2, 5, 5, 4)
    z = torch.randn_like(x)
    expected = F.relu(F.batch_norm(x.movedim(-1, 1), None, None, training=True).movedim(1, -1) + z)
    torch.testing.assert_close(channel_last(x, z), expected)


# --- amp_C multi-tensor kernels (csrc/multi_tensor_*_kernel.cu) -------------------------------


def test_multi_tensor_scale_writes_in_the_output_dtype_and_flags_non_finite_inputs():
    from cuda2npu.emulation.standins import amp_C
    from cuda2npu.emulation.standins.apex.multi_tensor_apply import multi_tensor_applier

    inputs = [torch.tensor([1.0, -2.0]), torch.tensor([3.0])]
    outputs = [torch.zeros(2, dtype=torch.float16), torch.zeros(1, dtype=torch.float16)]
    flag = torch.zeros(1, dtype=torch.int)
    multi_tensor_applier(amp_C.multi_tensor_scale, flag, [inputs, outputs], 0.5)
    assert outputs[0].tolist() == [0.5, -1.0] and outputs[1].tolist() == [1.5] and outputs[0].dtype == torch.float16
    assert int(flag) == 0
    inputs[1][0] = math.inf
    multi_tensor_applier(amp_C.multi_tensor_scale, flag, [inputs, outputs], 0.5)
    assert int(flag) == 1 and math.isinf(outputs[1].item())  # written anyway: infs propagate


@pytest.mark.parametrize(("arg_to_check", "flagged"), [(0, False), (1, True), (-1, True)])
def test_multi_tensor_axpby_checks_the_named_argument(arg_to_check, flagged):
    from cuda2npu.emulation.standins import amp_C

    x, y, out = [torch.tensor([1.0, 2.0])], [torch.tensor([10.0, math.nan])], [torch.zeros(2)]
    flag = torch.zeros(1, dtype=torch.int)
    amp_C.multi_tensor_axpby(2048, flag, [x, y, out], 2.0, 0.5, arg_to_check)
    assert out[0][0].item() == 2.0 * 1.0 + 0.5 * 10.0 and math.isnan(out[0][1].item())
    assert bool(int(flag)) is flagged


def test_multi_tensor_l2norm_total_and_per_tensor():
    from cuda2npu.emulation.standins import amp_C

    tensors = [torch.tensor([3.0, 4.0]), torch.tensor([[12.0]], dtype=torch.bfloat16)]
    flag = torch.zeros(1, dtype=torch.int)
    total, per_tensor = amp_C.multi_tensor_l2norm(2048, flag, [tensors], True)
    assert total.tolist() == [13.0] and per_tensor.tolist() == [5.0, 12.0] and total.dtype == torch.float32
    total, per_tensor = amp_C.multi_tensor_l2norm(2048, flag, [tensors], False)
    assert per_tensor.numel() == 0 and int(flag) == 0
    with pytest.raises(AttributeError, match="not provided"):
        amp_C.multi_tensor_adam  # noqa: B018
