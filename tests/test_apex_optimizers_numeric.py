"""apex's optimizers and amp_C kernels against an independent reference. There is one
implementation, the generated companion (``cuda2npu/templates/apex_npu_optimizers.py``), which the
emulation's stand-ins (``cuda2npu/emulation/standins/apex/optimizers``, ``standins/amp_C``) import:
each case runs through both doors (the companion loaded from its file, as a migrated project does,
and the stand-in package, as the original side of a validation does).

The reference below is a plain per-tensor loop written from NVIDIA/apex's CUDA kernels (each
function cites the kernel): float32 math (the kernels' ``MATH_T``), results rounded to the
dtype of the tensor the kernel stores them in. Every case runs several steps over two parameter
groups (one without weight decay) and compares parameters, optimizer state and step counts. The
state_dict tests check apex's state layout and that a state saved through one door resumes
through the other.
"""

from __future__ import annotations

import importlib.util
import io
import itertools
import math
import warnings
from pathlib import Path

import pytest
import torch

from cuda2npu.emulation.standins import amp_C as standin_amp_C
from cuda2npu.emulation.standins.apex import optimizers as standin_optimizers
from cuda2npu.emulation.standins.apex.multi_tensor_apply import multi_tensor_applier as standin_applier

TEMPLATE = Path(__file__).resolve().parent.parent / "cuda2npu" / "templates" / "apex_npu_optimizers.py"


def _load_companion():
    spec = importlib.util.spec_from_file_location("apex_npu_optimizers", TEMPLATE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


companion = _load_companion()
IMPLEMENTATIONS = {"companion": companion, "standin": standin_optimizers}
TOLERANCE = {
    torch.float32: dict(rtol=2e-5, atol=2e-6),
    torch.float16: dict(rtol=4e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=3e-2, atol=2e-2),
}
STEPS = 4
# (shape, group): group 0 has the case's weight decay, group 1 none
LAYOUT = [((7, 5), 0), ((13,), 0), ((4, 4), 1)]


# --- the independent reference (per tensor, from apex's CUDA kernels) -------------------------


def _bias(bias_correction, beta1, beta2, step):
    # multi_tensor_adam.cu / multi_tensor_lamb.cu: bias_correction1 = 1 - pow(beta1, step), else 1
    return (1 - beta1**step, 1 - beta2**step) if bias_correction else (1.0, 1.0)


def ref_adam(t, *, lr, beta1, beta2, eps, step, adam_w_mode, bias_correction, decay):
    """csrc/multi_tensor_adam.cu ``AdamFunctor``: p, g in their dtype, m and v float32."""
    bc1, bc2 = _bias(bias_correction, beta1, beta2, step)
    g, p = t["g"].float(), t["p"].float()
    if not adam_w_mode:  # ADAM_MODE_0: r_g = r_g + decay * r_p
        g = g + decay * p
    t["m"] = beta1 * t["m"] + (1 - beta1) * g
    t["v"] = beta2 * t["v"] + (1 - beta2) * g * g
    denom = torch.sqrt(t["v"] / bc2) + eps
    update = (t["m"] / bc1) / denom
    if adam_w_mode:  # ADAM_MODE_1: update = m_hat / denom + decay * r_p
        update = update + decay * p
    t["p"] = (p - lr * update).to(t["p"].dtype)


def ref_lamb(
    t,
    *,
    lr,
    beta1,
    beta2,
    eps,
    step,
    bias_correction,
    decay,
    grad_averaging,
    adam_w_mode,
    clip,
    use_nvlamb,
    inv_scale=1.0,
):
    """csrc/multi_tensor_lamb.cu (and multi_tensor_lamb_mp.cu with ``inv_scale`` and a float32
    ``master``): stage 1 writes the update into g (g's dtype), stage 2 applies the trust ratio."""
    bc1, bc2 = _bias(bias_correction, beta1, beta2, step)
    beta3 = 1 - beta1 if grad_averaging else 1.0  # grad_averaging == 1: beta3 = 1 - beta1
    param = t.get("master", t["p"])
    param_norm = torch.sqrt((param.float() ** 2).sum())  # multi_tensor_l2norm(param_list, per_tensor) first
    r_p = param.float() if decay != 0 else torch.zeros_like(param, dtype=torch.float32)  # "if (decay == 0) r_p = 0"
    g = t["g"].float() * inv_scale / clip  # scaled_grad = r_g / clipped_global_grad_norm
    if not adam_w_mode:  # MOMENT_MODE_0: L2 on the scaled grad
        g = g + decay * r_p
    m = t["m"].float() * beta1 + beta3 * g
    v = t["v"].float() * beta2 + (1 - beta2) * g * g
    update = (m / bc1) / (torch.sqrt(v / bc2) + eps)
    if adam_w_mode:  # MOMENT_MODE_1: (next_m_unbiased / denom) + (decay * r_p)
        update = update + decay * r_p
    t["m"], t["v"] = m.to(t["m"].dtype), v.to(t["v"].dtype)
    t["g"] = update.to(t["g"].dtype)  # stored into the gradient
    update_norm = torch.sqrt((t["g"].float() ** 2).sum())
    ratio = lr  # LAMBStage2Functor
    if (use_nvlamb or decay != 0.0) and update_norm != 0 and param_norm != 0:
        ratio = lr * (param_norm / update_norm)
    new = param.float() - ratio * t["g"].float()
    if "master" in t:
        t["master"] = new
    t["p"] = new.to(t["p"].dtype)


def ref_novograd(
    t, norm, *, lr, beta1, beta2, eps, step, bias_correction, decay, grad_averaging, moment_mode, norm_type
):
    """csrc/multi_tensor_novograd.cu: the per-tensor norm blended first (multi_tensor_norm_out_cuda,
    cleanup_v2), then ``NovoGradFunctor``; returns the new norm."""
    bc1, bc2 = (1 - beta1**step, math.sqrt(1 - beta2**step)) if bias_correction else (1.0, 1.0)
    beta3 = 1 - beta1 if grad_averaging else 1.0
    g, p, m = t["g"].float(), t["p"].float(), t["m"].float()
    if norm_type == 0:  # L-inf: gn = a * gn + b * n
        norm = beta2 * norm + (1 - beta2) * g.abs().max()
    else:  # L2: gn = sqrt(a * gn^2 + b * n^2)
        norm = torch.sqrt(beta2 * norm * norm + (1 - beta2) * (g * g).sum())
    denom = norm / bc2 + eps
    if moment_mode == 0:  # MOMENT_MODE_0
        g = g / denom + decay * p
        m = beta1 * m + beta3 * g
        p = p - lr * (m / bc1)
    else:  # MOMENT_MODE_1
        m = beta1 * m + beta3 * g
        p = p - lr * ((m / bc1) / denom + decay * p)
    t["m"], t["p"] = m.to(t["m"].dtype), p.to(t["p"].dtype)
    return norm


# --- cases ------------------------------------------------------------------------------------


def _initial(dtypes, seed=0):
    """Parameter values and STEPS steps of gradients (large enough that clipping to 1.0 acts)."""
    gen = torch.Generator().manual_seed(seed)
    values = [torch.randn(shape, generator=gen).to(dtype) for (shape, _), dtype in zip(LAYOUT, dtypes)]
    grads = [
        [(3 * torch.randn(shape, generator=gen)).to(dtype) for (shape, _), dtype in zip(LAYOUT, dtypes)]
        for _ in range(STEPS)
    ]
    return values, grads


def _groups(params, weight_decay, **extra):
    groups = [{"params": [], "weight_decay": weight_decay, **extra}, {"params": [], "weight_decay": 0.0, **extra}]
    for p, (_, group) in zip(params, LAYOUT):
        groups[group]["params"].append(p)
    return groups


def _run(cls, values, grads, weight_decay, steps=STEPS, **options):
    params = [torch.nn.Parameter(v.clone()) for v in values]
    optimizer = cls(_groups(params, weight_decay), **options)
    for step_grads in grads[:steps]:
        for p, g in zip(params, step_grads):
            p.grad = g.clone()
        optimizer.step()
    return params, optimizer


def _check(params, optimizer, expected, state_keys, dtype):
    for p, t in zip(params, expected):
        torch.testing.assert_close(p.detach(), t["p"], **TOLERANCE[dtype])
        for key in state_keys:
            state = optimizer.state[p][key]
            assert state.dtype == t[state_keys[key]].dtype, key
            torch.testing.assert_close(state, t[state_keys[key]], **TOLERANCE[dtype])


ADAM_CASES = list(itertools.product([True, False], [True, False], [0.0, 0.05]))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("adam_w_mode", "bias_correction", "weight_decay"), ADAM_CASES)
def test_fused_adam(impl, dtype, adam_w_mode, bias_correction, weight_decay):
    values, grads = _initial([dtype] * 3, seed=1)
    options = dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, adam_w_mode=adam_w_mode, bias_correction=bias_correction)
    params, optimizer = _run(IMPLEMENTATIONS[impl].FusedAdam, values, grads, weight_decay, **options)
    ref = [{"p": v.clone(), "m": torch.zeros(v.shape), "v": torch.zeros(v.shape)} for v in values]
    for step, step_grads in enumerate(grads, start=1):
        for t, g, (_, group) in zip(ref, step_grads, LAYOUT):
            t["g"] = g
            ref_adam(
                t,
                lr=0.01,
                beta1=0.8,
                beta2=0.99,
                eps=1e-6,
                step=step,
                adam_w_mode=adam_w_mode,
                bias_correction=bias_correction,
                decay=weight_decay if group == 0 else 0.0,
            )
    _check(params, optimizer, ref, {"exp_avg": "m", "exp_avg_sq": "v"}, dtype)
    assert [g["step"] for g in optimizer.param_groups] == [STEPS, STEPS]


def _lamb_reference(
    values,
    grads,
    *,
    lr,
    betas,
    eps,
    weight_decay,
    bias_correction,
    grad_averaging,
    adam_w_mode,
    max_grad_norm,
    use_nvlamb,
):
    ref = [{"p": v.clone(), "m": torch.zeros_like(v), "v": torch.zeros_like(v)} for v in values]
    for step, step_grads in enumerate(grads, start=1):
        # fused_lamb.py: one global norm over every group's gradients, before any update
        global_norm = torch.sqrt(sum((g.float() ** 2).sum() for g in step_grads))
        clip = global_norm / max_grad_norm if global_norm > max_grad_norm else 1.0
        for t, g, (_, group) in zip(ref, step_grads, LAYOUT):
            t["g"] = g.clone()
            ref_lamb(
                t,
                lr=lr,
                beta1=betas[0],
                beta2=betas[1],
                eps=eps,
                step=step,
                bias_correction=bias_correction,
                decay=weight_decay if group == 0 else 0.0,
                grad_averaging=grad_averaging,
                adam_w_mode=adam_w_mode,
                clip=clip,
                use_nvlamb=use_nvlamb,
            )
    return ref


LAMB_CASES = [
    # adam_w_mode, bias_correction, grad_averaging, use_nvlamb, weight_decay, max_grad_norm
    (True, True, True, False, 0.01, 1.0),
    (True, True, True, True, 0.01, 1.0),
    (False, True, True, False, 0.01, 1.0),
    (True, False, True, False, 0.01, 1.0),
    (True, True, False, False, 0.01, 1.0),
    (True, True, True, False, 0.0, 1.0),
    (True, True, True, True, 0.0, 1.0),
    (False, False, False, True, 0.1, 1.0),
    (True, True, True, False, 0.01, 1000.0),  # no clipping
    (True, True, True, False, 0.01, 0.0),  # apex divides every gradient by inf
]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    "dtypes", [(torch.float32,) * 3, (torch.float16, torch.float32, torch.float16)], ids=["fp32", "fp16+fp32"]
)
@pytest.mark.parametrize(
    ("adam_w_mode", "bias_correction", "grad_averaging", "use_nvlamb", "weight_decay", "max_grad_norm"), LAMB_CASES
)
def test_fused_lamb(
    impl, dtypes, adam_w_mode, bias_correction, grad_averaging, use_nvlamb, weight_decay, max_grad_norm
):
    values, grads = _initial(dtypes, seed=2)
    options = dict(
        lr=0.05,
        betas=(0.9, 0.99),
        eps=1e-6,
        bias_correction=bias_correction,
        grad_averaging=grad_averaging,
        adam_w_mode=adam_w_mode,
        max_grad_norm=max_grad_norm,
        use_nvlamb=use_nvlamb,
    )
    params, optimizer = _run(IMPLEMENTATIONS[impl].FusedLAMB, values, grads, weight_decay, **options)
    ref = _lamb_reference(
        values,
        grads,
        lr=0.05,
        betas=(0.9, 0.99),
        eps=1e-6,
        weight_decay=weight_decay,
        bias_correction=bias_correction,
        grad_averaging=grad_averaging,
        adam_w_mode=adam_w_mode,
        max_grad_norm=max_grad_norm,
        use_nvlamb=use_nvlamb,
    )
    dtype = torch.float16 if torch.float16 in dtypes else torch.float32
    _check(params, optimizer, ref, {"exp_avg": "m", "exp_avg_sq": "v"}, dtype)
    for p, t in zip(params, ref):  # apex leaves the last update in the gradient
        torch.testing.assert_close(p.grad, t["g"], **TOLERANCE[dtype])
    assert [g["step"] for g in optimizer.param_groups] == [STEPS, STEPS]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_fused_lamb_rejects_bfloat16_and_amsgrad(impl):
    cls = IMPLEMENTATIONS[impl].FusedLAMB
    p = torch.nn.Parameter(torch.ones(3, dtype=torch.bfloat16))
    p.grad = torch.ones(3, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="only support fp16 and fp32"):
        cls([p]).step()
    with pytest.raises(RuntimeError, match="AMSGrad"):
        cls([p], amsgrad=True)


NOVOGRAD_CASES = [
    # reg_inside_moment, grad_averaging, bias_correction, norm_type, init_zero, weight_decay
    (False, True, True, 2, False, 0.0),
    (False, True, True, 2, False, 0.01),
    (True, True, True, 2, False, 0.01),
    (False, False, True, 2, False, 0.01),
    (False, True, False, 2, False, 0.01),
    (False, True, True, 0, False, 0.01),
    (True, False, False, 0, True, 0.05),
    (False, True, True, 2, True, 0.0),
]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    "dtypes", [(torch.float32,) * 3, (torch.float16, torch.float32, torch.float32)], ids=["fp32", "fp16+fp32"]
)
@pytest.mark.parametrize(
    ("reg_inside_moment", "grad_averaging", "bias_correction", "norm_type", "init_zero", "weight_decay"), NOVOGRAD_CASES
)
def test_fused_novograd(
    impl, dtypes, reg_inside_moment, grad_averaging, bias_correction, norm_type, init_zero, weight_decay
):
    values, grads = _initial(dtypes, seed=3)
    options = dict(
        lr=0.02,
        betas=(0.95, 0.98),
        eps=1e-8,
        reg_inside_moment=reg_inside_moment,
        grad_averaging=grad_averaging,
        bias_correction=bias_correction,
        norm_type=norm_type,
        init_zero=init_zero,
    )
    params, optimizer = _run(IMPLEMENTATIONS[impl].FusedNovoGrad, values, grads, weight_decay, **options)
    ref = [{"p": v.clone(), "m": torch.zeros_like(v)} for v in values]
    norms = {}  # per tensor; fused_novograd.py: the first step's norm (zero with init_zero)
    for step, step_grads in enumerate(grads, start=1):
        for i, (t, g, (_, group)) in enumerate(zip(ref, step_grads, LAYOUT)):
            t["g"] = g
            if i not in norms:
                g32 = g.float()
                norms[i] = torch.zeros(()) if init_zero else (g32.abs().max() if norm_type == 0 else g32.norm())
            norms[i] = ref_novograd(
                t,
                norms[i],
                lr=0.02,
                beta1=0.95,
                beta2=0.98,
                eps=1e-8,
                step=step,
                bias_correction=bias_correction,
                decay=weight_decay if group == 0 else 0.0,
                grad_averaging=grad_averaging,
                moment_mode=0 if reg_inside_moment else 1,
                norm_type=norm_type,
            )
    dtype = torch.float16 if torch.float16 in dtypes else torch.float32
    _check(params, optimizer, ref, {"exp_avg": "m"}, dtype)
    for group_index, group in enumerate(optimizer.param_groups):  # [float16 list, float32 list], float32
        members = [i for i, (_, g) in enumerate(LAYOUT) if g == group_index]
        for position, list_dtype in enumerate((torch.float16, torch.float32)):
            expected = [norms[i] for i in members if dtypes[i] == list_dtype]
            saved = group["exp_avg_sq"][position]
            assert saved.dtype == torch.float32 and saved.numel() == len(expected)
            if expected:
                torch.testing.assert_close(saved, torch.stack(expected), **TOLERANCE[dtype])


def _mp_lamb_reference(values, grads, *, reduced, scale=1.0, found_inf_steps=(), **options):
    """fused_mixed_precision_lamb.py + multi_tensor_lamb_mp.cu; a step with found_inf is skipped whole."""
    ref = [
        {
            "p": v.clone(),
            "m": torch.zeros(v.shape, dtype=torch.float32 if reduced else v.dtype),
            "v": torch.zeros(v.shape, dtype=torch.float32 if reduced else v.dtype),
        }
        for v in values
    ]
    if reduced:
        for t in ref:
            t["master"] = t["p"].float()
    step = 0
    for index, step_grads in enumerate(grads):
        if index in found_inf_steps:
            continue
        step += 1
        scaled = [(g.float() * scale).to(g.dtype) for g in step_grads]
        global_norm = torch.sqrt(sum((g.float() ** 2).sum() for g in scaled))  # of the scaled gradients
        max_norm = options["max_grad_norm"] * scale
        clip = global_norm / max_norm if global_norm > max_norm else 1.0
        for t, g, (_, group) in zip(ref, scaled, LAYOUT):
            t["g"] = g.clone()
            ref_lamb(
                t,
                lr=options["lr"],
                beta1=options["betas"][0],
                beta2=options["betas"][1],
                eps=options["eps"],
                step=step,
                bias_correction=True,
                decay=options["weight_decay"] if group == 0 else 0.0,
                grad_averaging=True,
                adam_w_mode=True,
                clip=clip,
                use_nvlamb=False,
                inv_scale=1.0 / scale,
            )
    return ref, step


class _Scaler:
    """The two GradScaler methods apex's FusedMixedPrecisionLamb calls."""

    def __init__(self, scale, found_inf):
        self.scale, self.found_inf = scale, found_inf

    def _check_inf_per_device(self, optimizer):
        return {torch.device("cpu"): torch.tensor([float(self.found_inf)])}

    def _get_scale_async(self):
        return torch.tensor([self.scale])


MP_OPTIONS = dict(lr=0.05, betas=(0.9, 0.99), eps=1e-6, max_grad_norm=1.0)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    ("dtype", "reduced"),
    [(torch.float32, False), (torch.float16, False), (torch.float16, True), (torch.bfloat16, True)],
)
def test_fused_mixed_precision_lamb(impl, dtype, reduced):
    """Without reduced_precision_dtype: the kernel's 4-list form (state in the parameters' dtype);
    with it: float32 master weights and moments (the 5-list form)."""
    options = {"reduced_precision_dtype": dtype} if reduced else {}
    values, grads = _initial([dtype] * 3, seed=4)
    cls = IMPLEMENTATIONS[impl].FusedMixedPrecisionLamb
    params, optimizer = _run(cls, values, grads, 0.01, **MP_OPTIONS, **options)
    ref, steps = _mp_lamb_reference(values, grads, reduced=reduced, weight_decay=0.01, **MP_OPTIONS)
    _check(params, optimizer, ref, {"exp_avg": "m", "exp_avg_sq": "v"}, dtype)
    for group in optimizer.param_groups:
        assert group["step"].dtype == torch.int32 and group["step"].tolist() == [steps]
        assert group["lr"].dtype == torch.float32


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_fused_mixed_precision_lamb_unscales_and_skips_overflow(impl):
    values, grads = _initial([torch.bfloat16] * 3, seed=5)
    cls = IMPLEMENTATIONS[impl].FusedMixedPrecisionLamb
    params = [torch.nn.Parameter(v.clone()) for v in values]
    optimizer = cls(_groups(params, 0.01), reduced_precision_dtype=torch.bfloat16, **MP_OPTIONS)
    scale = 1024.0
    for index, step_grads in enumerate(grads):
        for p, g in zip(params, step_grads):
            p.grad = (g.float() * scale).to(g.dtype)
        optimizer.step(grad_scaler=_Scaler(scale, found_inf=index == 1))
    ref, steps = _mp_lamb_reference(
        values, grads, reduced=True, scale=scale, found_inf_steps=(1,), weight_decay=0.01, **MP_OPTIONS
    )
    assert steps == STEPS - 1
    _check(params, optimizer, ref, {"exp_avg": "m", "exp_avg_sq": "v"}, torch.bfloat16)
    assert [g["step"].tolist() for g in optimizer.param_groups] == [[steps], [steps]]


def test_fused_mixed_precision_lamb_with_torch_grad_scaler():
    """torch's GradScaler.step passes itself to optimizers with ``_step_supports_amp_scaling``."""
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3)
    optimizer = companion.FusedMixedPrecisionLamb(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
    reference = [p.detach().clone() for p in model.parameters()]
    loss = model(torch.randn(4, 6)).square().sum()
    scaler.scale(loss).backward()
    unscaled = [p.grad / 256.0 for p in model.parameters()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        scaler.step(optimizer)
    scaler.update()
    global_norm = torch.sqrt(sum((g**2).sum() for g in unscaled))
    clip = global_norm if global_norm > 1.0 else 1.0
    for p0, p, g, decay in zip(reference, model.parameters(), unscaled, (0.01, 0.01)):
        t = {"p": p0.clone(), "g": g * 256.0, "m": torch.zeros_like(p0), "v": torch.zeros_like(p0)}
        ref_lamb(
            t,
            lr=0.01,
            beta1=0.9,
            beta2=0.999,
            eps=1e-6,
            step=1,
            bias_correction=True,
            decay=decay,
            grad_averaging=True,
            adam_w_mode=True,
            clip=clip,
            use_nvlamb=False,
            inv_scale=1 / 256.0,
        )
        torch.testing.assert_close(p.detach(), t["p"], rtol=2e-5, atol=2e-6)


# --- state_dict: apex's layout, and resuming across implementations --------------------------


STATE_CASES = {
    "FusedAdam": (dict(lr=0.01, bias_correction=False), {"exp_avg", "exp_avg_sq"}, set()),
    "FusedLAMB": (dict(lr=0.05), {"exp_avg", "exp_avg_sq"}, set()),
    "FusedNovoGrad": (dict(lr=0.02), {"exp_avg"}, {"exp_avg_sq"}),
    "FusedMixedPrecisionLamb": (
        dict(lr=0.05, reduced_precision_dtype=torch.bfloat16),
        {"exp_avg", "exp_avg_sq"},
        set(),
    ),
}


def _state_values(name):
    dtype = torch.bfloat16 if name == "FusedMixedPrecisionLamb" else torch.float32
    return _initial([dtype] * 3, seed=6)


@pytest.mark.parametrize("name", STATE_CASES)
@pytest.mark.parametrize(
    ("saver", "loader"), [("standin", "companion"), ("companion", "standin"), ("companion", "companion")]
)
def test_state_dict_resumes_across_implementations(name, saver, loader):
    """Two steps, a state_dict through torch.save/torch.load, two more steps: the same as four steps."""
    options, state_keys, group_keys = STATE_CASES[name]
    values, grads = _state_values(name)
    params, first = _run(getattr(IMPLEMENTATIONS[saver], name), values, grads, 0.01, steps=2, **options)
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=False)
    assert all(set(state) == state_keys for state in saved["state"].values())  # apex's per-parameter state
    assert all({"step", *group_keys} <= set(group) for group in saved["param_groups"])
    resumed = [torch.nn.Parameter(p.detach().clone()) for p in params]
    second = getattr(IMPLEMENTATIONS[loader], name)(_groups(resumed, 0.01), **options)
    second.load_state_dict(saved)
    for state in second.state.values():
        if name == "FusedMixedPrecisionLamb":  # float32 moments of bfloat16 parameters stay float32
            assert state["exp_avg"].dtype == torch.float32
    for step_grads in grads[2:]:
        for p, g in zip(resumed, step_grads):
            p.grad = g.clone()
        second.step()
    straight, _ = _run(getattr(IMPLEMENTATIONS[loader], name), values, grads, 0.01, **options)
    dtype = values[0].dtype
    if name == "FusedMixedPrecisionLamb":  # apex saves no master weights: resumed from the bfloat16 values
        tolerance = TOLERANCE[torch.bfloat16]
    else:
        tolerance = TOLERANCE[dtype]
    for p, q in zip(resumed, straight):
        torch.testing.assert_close(p.detach(), q.detach(), **tolerance)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_fused_adam_keeps_float32_moments_of_half_parameters_across_a_reload(impl):
    values, grads = _initial([torch.float16] * 3, seed=7)
    params, optimizer = _run(IMPLEMENTATIONS[impl].FusedAdam, values, grads, 0.0, steps=1)
    other = companion.FusedAdam(_groups([torch.nn.Parameter(p.detach().clone()) for p in params], 0.0))
    other.load_state_dict(optimizer.state_dict())
    assert all(s["exp_avg"].dtype == torch.float32 for s in other.state.values())


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_zero_grad_follows_set_grad_none(impl):
    p = torch.nn.Parameter(torch.ones(2))
    for cls in ("FusedAdam", "FusedLAMB", "FusedNovoGrad"):
        p.grad = torch.ones(2)
        getattr(IMPLEMENTATIONS[impl], cls)([p]).zero_grad()
        assert p.grad is None


# --- amp_C kernels and multi_tensor_applier ---------------------------------------------------

KERNELS = {"companion": (companion, companion.multi_tensor_applier), "standin": (standin_amp_C, standin_applier)}


@pytest.mark.parametrize("impl", KERNELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_multi_tensor_l2norm(impl, dtype):
    """csrc/multi_tensor_l2norm_kernel.cu: float32 sums of squares; (total [1], per-tensor [n] or [0])."""
    kernels, applier = KERNELS[impl]
    gen = torch.Generator().manual_seed(8)
    tensors = [(300 * torch.randn(shape, generator=gen)).to(dtype) for shape in ((70000,), (3, 5), (1,))]
    flag = torch.zeros(1, dtype=torch.int)
    total, per_tensor = applier(kernels.multi_tensor_l2norm, flag, [tensors], True)
    expected = [math.sqrt(float((t.double() ** 2).sum())) for t in tensors]  # no float16 overflow (> 65504)
    assert total.dtype == per_tensor.dtype == torch.float32 and total.shape == (1,)
    torch.testing.assert_close(per_tensor, torch.tensor(expected), rtol=1e-5, atol=0)
    torch.testing.assert_close(total, torch.tensor([math.sqrt(sum(e * e for e in expected))]), rtol=1e-5, atol=0)
    assert applier(kernels.multi_tensor_l2norm, flag, [tensors], False)[1].numel() == 0
    assert int(flag) == 0
    tensors[1][0, 0] = math.nan
    applier(kernels.multi_tensor_l2norm, flag, [tensors], False)
    assert int(flag) == 1  # L2NormFunctor: if (!isfinite(final)) *noop_gmem = 1


@pytest.mark.parametrize("impl", KERNELS)
def test_multi_tensor_scale_in_place_and_into_another_dtype(impl):
    """csrc/multi_tensor_scale_kernel.cu: out = float(in) * scale in out's dtype; the flag tests the inputs."""
    kernels, applier = KERNELS[impl]
    grads = [torch.tensor([1.0, -3.0]), torch.tensor([[70000.0]])]
    halves = [torch.zeros(2, dtype=torch.float16), torch.zeros(1, 1, dtype=torch.float16)]
    flag = torch.zeros(1, dtype=torch.int)
    applier(kernels.multi_tensor_scale, flag, [grads, halves], 2.0)
    assert halves[0].tolist() == [2.0, -6.0] and math.isinf(halves[1].item())  # overflow in the output only
    assert int(flag) == 0
    applier(kernels.multi_tensor_scale, flag, [grads, grads], 0.5)  # in place (Megatron's clip_grads)
    assert grads[0].tolist() == [0.5, -1.5] and grads[1].item() == 35000.0 and int(flag) == 0
    big = [torch.tensor([1e30])]
    applier(kernels.multi_tensor_scale, flag, [big, big], 1e30)  # finite input, its output overflows: no flag
    assert math.isinf(big[0].item()) and int(flag) == 0
    grads[0][1] = math.inf
    applier(kernels.multi_tensor_scale, flag, [grads, grads], 0.5)
    assert int(flag) == 1


@pytest.mark.parametrize("impl", KERNELS)
@pytest.mark.parametrize(("arg_to_check", "flagged"), [(0, False), (1, True), (-1, True)])
def test_multi_tensor_axpby(impl, arg_to_check, flagged):
    """csrc/multi_tensor_axpby_kernel.cu: out = a * x + b * y; the flag tests x (0), y (1) or both (-1)."""
    kernels, applier = KERNELS[impl]
    x, y = [torch.tensor([1.0, 2.0])], [torch.tensor([10.0, math.nan])]
    flag = torch.zeros(1, dtype=torch.int)
    applier(kernels.multi_tensor_axpby, flag, [x, y, x], 2.0, 0.5, arg_to_check)  # out is x
    assert x[0][0].item() == 2.0 * 1.0 + 0.5 * 10.0 and math.isnan(x[0][1].item())
    assert bool(int(flag)) is flagged


def test_multi_tensor_applier_passes_the_chunk_size():
    seen = []
    result = companion.multi_tensor_applier(lambda *args: seen.append(args) or "done", "flag", [["t"]], 1.5)
    assert result == "done" and seen == [(2048 * 32, "flag", [["t"]], 1.5)]
    assert companion.multi_tensor_applier.available and companion.MultiTensorApply(1024).chunk_size == 1024


@pytest.mark.parametrize("impl", KERNELS)
def test_megatron_style_gradient_clipping_equals_clip_grad_norm(impl):
    """Megatron's clip_grads (and NVIDIA BERT's): l2norm, then scale in place by max_norm / (norm + 1e-6)."""
    kernels, applier = KERNELS[impl]
    torch.manual_seed(9)
    grads = [torch.randn(40, 30) * 5, torch.randn(30) * 5]
    copies = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(copies, grads):
        p.grad = g.clone()
    flag = torch.zeros(1, dtype=torch.int)
    norm, _ = applier(kernels.multi_tensor_l2norm, flag, [grads], False)
    clip_coeff = 1.0 / (norm.item() + 1.0e-6)
    if clip_coeff < 1.0:
        applier(kernels.multi_tensor_scale, flag, [grads, grads], clip_coeff)
    expected_norm = torch.nn.utils.clip_grad_norm_(copies, max_norm=1.0)
    torch.testing.assert_close(norm[0], expected_norm)
    for g, p in zip(grads, copies):
        torch.testing.assert_close(g, p.grad)
