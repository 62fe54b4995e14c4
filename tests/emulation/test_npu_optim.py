"""torch_npu.optim.NpuFused* emulation (docs/reference/torch_npu.md §3).

Adam/AdamW/SGD/Adadelta/RMSprop are checked step by step against ``torch.optim`` (the
reference says they share its math); Lamb and RMSpropTF against float64 references written
here from §3. The optimizer math runs on CPU tensors in this process; one training step on
npu parameters runs in the npu worker.
"""

from __future__ import annotations

import math

import pytest
import torch
from npu_process import in_npu_process

from cuda2npu.emulation import npu_optim

STEPS = 5


def make_params(seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g).to(dtype).requires_grad_() for shape in ((4, 3), (3,), (2, 2, 2))]


def set_grads(params, step):
    g = torch.Generator().manual_seed(100 + step)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g).to(p.dtype)


def run(optimizer_factory, params):
    optimizer = optimizer_factory(params)
    for step in range(STEPS):
        if step == 0:
            set_grads(params, step)
        else:
            g = torch.Generator().manual_seed(100 + step)
            for p in params:
                p.grad.copy_(torch.randn(p.shape, generator=g))  # in place: fused grads stay valid
        optimizer.step()
    return [p.detach().clone() for p in params]


@pytest.mark.parametrize(
    "fused,reference",
    [
        (lambda ps: npu_optim.NpuFusedAdam(ps, lr=0.01), lambda ps: torch.optim.Adam(ps, lr=0.01)),
        (
            lambda ps: npu_optim.NpuFusedAdam(ps, lr=0.02, weight_decay=0.1, amsgrad=True),
            lambda ps: torch.optim.Adam(ps, lr=0.02, weight_decay=0.1, amsgrad=True),
        ),
        (lambda ps: npu_optim.NpuFusedAdamW(ps, lr=0.01), lambda ps: torch.optim.AdamW(ps, lr=0.01)),
        (
            lambda ps: npu_optim.NpuFusedAdamW(ps, lr=0.05, betas=(0.8, 0.9), weight_decay=0.3),
            lambda ps: torch.optim.AdamW(ps, lr=0.05, betas=(0.8, 0.9), weight_decay=0.3),
        ),
        (lambda ps: npu_optim.NpuFusedSGD(ps, lr=0.1), lambda ps: torch.optim.SGD(ps, lr=0.1)),
        (
            lambda ps: npu_optim.NpuFusedSGD(ps, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
            lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
        ),
        (
            lambda ps: npu_optim.NpuFusedSGD(ps, lr=0.1, momentum=0.9, nesterov=True),
            lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
        ),
        (
            lambda ps: npu_optim.NpuFusedAdadelta(ps, weight_decay=0.1),
            lambda ps: torch.optim.Adadelta(ps, weight_decay=0.1),
        ),
        (
            lambda ps: npu_optim.NpuFusedRMSprop(ps, lr=0.01, weight_decay=0.1),
            lambda ps: torch.optim.RMSprop(ps, lr=0.01, weight_decay=0.1),
        ),
        (
            lambda ps: npu_optim.NpuFusedRMSprop(ps, lr=0.01, momentum=0.9, centered=True),
            lambda ps: torch.optim.RMSprop(ps, lr=0.01, momentum=0.9, centered=True),
        ),
    ],
)
def test_matches_torch_optim(fused, reference):
    got = run(fused, make_params())
    want = run(reference, make_params())
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


def test_adam_and_adamw_differ_exactly_by_l2_vs_decoupled_decay():
    adam = run(lambda ps: npu_optim.NpuFusedAdam(ps, lr=0.05, weight_decay=0.5), make_params())
    adamw = run(lambda ps: npu_optim.NpuFusedAdamW(ps, lr=0.05, weight_decay=0.5), make_params())
    assert not torch.allclose(adam[0], adamw[0], atol=1e-4)


def lamb_reference(params, grads_per_step, lr, betas, eps, wd, adam=False, use_global_grad_norm=False):
    """§3: no bias correction; update = m/(sqrt(v)+eps) + wd*p; trust = clamp(|p|,0,10)/|update|."""
    params = [p.detach().double().clone() for p in params]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for grads in grads_per_step:
        grads = [g.double() for g in grads]
        if use_global_grad_norm:
            norm = math.sqrt(sum(float((g * g).sum()) for g in grads))
            if norm > 1:
                grads = [g / norm for g in grads]
        for i, (p, g) in enumerate(zip(params, grads)):
            m[i] = betas[0] * m[i] + (1 - betas[0]) * g
            v[i] = betas[1] * v[i] + (1 - betas[1]) * g * g
            update = m[i] / (v[i].sqrt() + eps) + wd * p
            w_norm, u_norm = min(float(p.norm()), 10.0), float(update.norm())
            trust = 1.0 if adam or w_norm == 0 or u_norm == 0 else w_norm / u_norm
            params[i] = p - lr * trust * update
    return params


def recorded_grads(params):
    steps = []
    for step in range(STEPS):
        g = torch.Generator().manual_seed(100 + step)
        steps.append([torch.randn(p.shape, generator=g) for p in params])
    return steps


@pytest.mark.parametrize("kwargs", [{}, {"weight_decay": 0.1}, {"adam": True}, {"use_global_grad_norm": True}])
def test_lamb_matches_reference(kwargs):
    params = make_params()
    for p in params:  # make a trust ratio above the clamp visible
        p.data.mul_(20 if not kwargs else 1)
    expected = lamb_reference(
        params,
        recorded_grads(params),
        0.01,
        (0.9, 0.999),
        1e-6,
        kwargs.get("weight_decay", 0),
        kwargs.get("adam", False),
        kwargs.get("use_global_grad_norm", False),
    )
    got = run(lambda ps: npu_optim.NpuFusedLamb(ps, lr=0.01, **kwargs), params)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a.double(), b, atol=1e-5, rtol=1e-5)


def rmsprop_tf_reference(params, grads_per_step, lr, alpha, eps, wd, momentum, centered, decoupled, lr_in_momentum):
    """timm's TF RMSprop as in §3: square_avg starts at 1, eps inside the sqrt."""
    params = [p.detach().double().clone() for p in params]
    sq = [torch.ones_like(p) for p in params]
    ga = [torch.zeros_like(p) for p in params]
    buf = [torch.zeros_like(p) for p in params]
    for grads in grads_per_step:
        for i, g in enumerate(grads):
            g, p = g.double(), params[i]
            if wd:
                if decoupled:
                    p = p - wd * p
                else:
                    g = g + wd * p
            sq[i] = sq[i] + (1 - alpha) * (g * g - sq[i])
            if centered:
                ga[i] = ga[i] + (1 - alpha) * (g - ga[i])
                avg = (sq[i] - ga[i] * ga[i] + eps).sqrt()
            else:
                avg = (sq[i] + eps).sqrt()
            if momentum > 0:
                if lr_in_momentum:
                    buf[i] = momentum * buf[i] + lr * g / avg
                    p = p - buf[i]
                else:
                    buf[i] = momentum * buf[i] + g / avg
                    p = p - lr * buf[i]
            else:
                p = p - lr * g / avg
            params[i] = p
    return params


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"momentum": 0.9},
        {"momentum": 0.9, "lr_in_momentum": False},
        {"centered": True, "weight_decay": 0.1},
        {"weight_decay": 0.1, "decoupled_decay": True},
    ],
)
def test_rmsprop_tf_matches_reference(kwargs):
    params = make_params()
    full = {**dict(momentum=0.0, centered=False, weight_decay=0, decoupled_decay=False, lr_in_momentum=True), **kwargs}
    expected = rmsprop_tf_reference(
        params,
        recorded_grads(params),
        0.01,
        0.9,
        1e-10,
        full["weight_decay"],
        full["momentum"],
        full["centered"],
        full["decoupled_decay"],
        full["lr_in_momentum"],
    )
    got = run(lambda ps: npu_optim.NpuFusedRMSpropTF(ps, lr=0.01, **kwargs), params)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a.double(), b, atol=1e-5, rtol=1e-5)


def test_default_hyperparameters_are_documented_ones():
    p = make_params()
    assert npu_optim.NpuFusedAdamW(p).defaults["weight_decay"] == 1e-2
    assert npu_optim.NpuFusedAdam(p).defaults["weight_decay"] == 0
    assert npu_optim.NpuFusedLamb(p).defaults["eps"] == 1e-6
    assert npu_optim.NpuFusedRMSpropTF(p).defaults["alpha"] == 0.9
    with pytest.raises(ValueError, match="learning rate"):
        npu_optim.NpuFusedSGD(p)


def test_bf16_parameters_raise_type_error():
    params = make_params(dtype=torch.bfloat16)
    optimizer = npu_optim.NpuFusedAdamW(params)
    set_grads(params, 0)
    with pytest.raises(TypeError, match="float32 or float16"):
        optimizer.step()


def test_fp16_parameters_are_accepted():
    params = make_params(dtype=torch.float16)
    optimizer = npu_optim.NpuFusedSGD(params, lr=0.1)
    set_grads(params, 0)
    optimizer.step()
    assert params[0].dtype == torch.float16


def test_zero_grad_set_to_none_raises_and_default_zeroes_in_place():
    params = make_params()
    optimizer = npu_optim.NpuFusedAdam(params)
    set_grads(params, 0)
    grad = params[0].grad
    with pytest.raises(ValueError, match="set_to_none"):
        optimizer.zero_grad(set_to_none=True)
    optimizer.zero_grad()
    assert params[0].grad is grad and torch.count_nonzero(grad) == 0


def test_step_is_a_python_int():
    params = make_params()
    optimizer = npu_optim.NpuFusedAdam(params)
    set_grads(params, 0)
    optimizer.step()
    optimizer.step()
    assert type(optimizer.state[params[0]]["step"]) is int and optimizer.state[params[0]]["step"] == 2


def test_replacing_grads_after_fusion_is_reported():
    params = make_params()
    optimizer = npu_optim.NpuFusedAdamW(params)
    set_grads(params, 0)
    optimizer.step()
    set_grads(params, 1)  # new grad tensors: torch_npu would keep using the fused buffer
    with pytest.raises(RuntimeError, match="replaced"):
        optimizer.step()


def test_late_first_gradient_is_reported():
    params = make_params()
    optimizer = npu_optim.NpuFusedSGD(params, lr=0.1)
    params[0].grad = torch.ones_like(params[0])
    optimizer.step()
    params[1].grad = torch.ones_like(params[1])
    with pytest.raises(RuntimeError, match="first gradient"):
        optimizer.step()


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_clip_grad_norm_fused_matches_torch(norm_type):
    params, reference = make_params(), make_params()
    set_grads(params, 0)
    set_grads(reference, 0)
    for p in params + reference:
        p.grad.mul_(10)
    total = npu_optim.NpuFusedSGD(params, lr=0.1).clip_grad_norm_fused_(1.0, norm_type=norm_type)
    expected = torch.nn.utils.clip_grad_norm_(reference, 1.0, norm_type=norm_type)
    torch.testing.assert_close(total, expected)
    for a, b in zip(params, reference):
        torch.testing.assert_close(a.grad, b.grad)


@pytest.mark.parametrize("name", ["NpuFusedAdamP", "NpuFusedBertAdam"])
def test_unemulated_optimizers_say_so(name):
    with pytest.raises(NotImplementedError, match=name):
        getattr(npu_optim, name)(make_params(), lr=0.1)


@in_npu_process
def test_fused_optimizer_trains_npu_model():
    import torch_npu

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).npu()
    reference = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    reference.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    fused = torch_npu.optim.NpuFusedAdamW(model.parameters(), lr=0.01)
    plain = torch.optim.AdamW(reference.parameters(), lr=0.01)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    for _ in range(3):
        fused.zero_grad()
        plain.zero_grad()
        torch.nn.functional.mse_loss(model(x.npu()), y.npu()).backward()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        fused.step()
        plain.step()
    for a, b in zip(model.parameters(), reference.parameters()):
        assert a.device.type == "npu"
        torch.testing.assert_close(a.detach().cpu(), b.detach(), atol=1e-6, rtol=1e-6)
