"""What every network of :mod:`agents.nets` shares: the network description stored in checkpoints
(:class:`NetworkConfig`, built from an env by :func:`config_for_env`), the :func:`mlp` building block and its fast
functional call (:func:`run_mlp` over a :class:`ParamView`), action masking (:func:`masked`) and numpy → tensor
conversion of observations (:func:`obs_to_tensors`)."""

from __future__ import annotations

import operator

import torch
import torch.nn as nn
import torch.nn.functional as F
from gpusched_lab.agents.nets.config import (  # noqa: F401 - re-exported
    ENCODERS,
    OBS_MODE_OF_ENCODER,
    SLOT_KINDS,
    NetworkConfig,
    config_for_env,
    config_for_layout,
)


def mlp(sizes: list[int], last_activation: bool = False) -> nn.Sequential:
    mods: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        mods.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_activation:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


class ParamView:
    """A module's parameters as a forward reads them, by name: the Parameters themselves while autograd records,
    else detached views of them. The views share the Parameters' storage, so optimizer steps and
    ``load_state_dict`` show through, and they skip autograd's dispatch, which at batch 1 costs about half as much
    again as the op itself (a rollout's forward is ~35 small matmuls). Stale once a parameter is replaced
    (``load_state_dict(assign=True)``, attribute assignment) or the module moved (``.to()``, ``.double()``: every
    parameter's storage changes, so the first one's tells): :func:`param_view` checks both on every call and
    rebuilds. (Assigning ``p.data`` of one parameter by hand is not seen.)"""

    def __init__(self, module: nn.Module):
        self.checks = [
            (mod._parameters, name, p)
            for mod in module.modules()
            for name, p in mod._parameters.items()
            if p is not None
        ]
        self.first = self.checks[0][2] if self.checks else None
        self.first_ptr = self.first.data_ptr() if self.first is not None else 0
        self.live = dict(module.named_parameters())
        self.frozen = {k: v.detach() for k, v in self.live.items()}
        # a Sequential of Linear / ReLU (an :func:`mlp`): its layers as (weight name, bias name) or None (ReLU)
        self.layers = (
            [(f"{i}.weight", f"{i}.bias") if type(m) is nn.Linear else None for i, m in enumerate(module)]
            if isinstance(module, nn.Sequential) and all(type(m) in (nn.Linear, nn.ReLU) for m in module)
            else None
        )

    def valid(self) -> bool:
        if self.first is not None and self.first.data_ptr() != self.first_ptr:
            return False
        return all(d.get(name) is p for d, name, p in self.checks)


class ViewsCheck:
    """Whether several :class:`ParamView` are all still valid, in one pass (what :meth:`ParamView.valid` checks of
    each, as C-level loops): a cache built from their views checks this instead of fetching every view again."""

    def __init__(self, views: list[ParamView]):
        checks = [c for view in views for c in view.checks]
        self.dicts = [d for d, _, _ in checks]
        self.names = [name for _, name, _ in checks]
        self.params = [p for _, _, p in checks]
        self.firsts = [view.first for view in views if view.first is not None]
        self.ptrs = [view.first_ptr for view in views if view.first is not None]

    def valid(self) -> bool:
        return list(map(torch.Tensor.data_ptr, self.firsts)) == self.ptrs and all(
            map(operator.is_, map(dict.get, self.dicts, self.names), self.params)
        )


def param_view(module: nn.Module) -> ParamView:
    """The module's :class:`ParamView` (cached on the module, rebuilt when stale)."""
    view = module.__dict__.get("_param_view")
    if view is None or not view.valid():
        view = module.__dict__["_param_view"] = ParamView(module)
    return view


def run_mlp(seq: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """``seq(x)`` for a :func:`mlp` (Linear / ReLU layers) as plain function calls: at batch 1 the GNN is bound by
    the number of ops, and a module call (hooks, Python dispatch) or autograd's dispatch of a Parameter outside
    autograd costs about as much as the op itself (:class:`ParamView`)."""
    view = param_view(seq)
    if view.layers is None:
        return seq(x)
    params = view.live if torch.is_grad_enabled() else view.frozen
    for layer in view.layers:
        x = torch.relu(x) if layer is None else F.linear(x, params[layer[0]], params[layer[1]])
    return x


def masked(scores: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """Scores with invalid actions set to −inf (a row with no valid action is left unmasked)."""
    valid = action_mask > 0
    valid = valid | ~valid.any(dim=-1, keepdim=True)
    return scores.masked_fill(~valid, float("-inf"))


def obs_to_tensors(obs: dict, device: torch.device | str = "cpu", batched: bool | None = None) -> dict:
    """numpy observations (one or a batch) → float tensors with a batch dimension (``edge_index`` stays int64)."""
    out = {}
    for k, v in obs.items():
        t = torch.as_tensor(v, device=device)
        t = t.long() if k == "edge_index" else t.float()
        out[k] = t
    if batched is None:
        batched = out["action_mask"].dim() == 2
    if not batched:
        out = {k: v.unsqueeze(0) for k, v in out.items()}
    return out


class _FlatLayout:
    """The flat buffers of a :class:`FlatAdam`: parameters, gradients, both moments and the step counts, each one
    1-D tensor whose slices the parameters and their state are (views)."""

    def __init__(self, opt: FlatAdam, group: dict, params: list[torch.Tensor]):
        ref = params[0]
        sizes = [p.numel() for p in params]
        n = sum(sizes)
        state = opt.state
        first = state.get(ref, {})
        steps = [float(state[p]["step"]) if "step" in state.get(p, {}) else 0.0 for p in params]
        with torch.no_grad():
            self.params = torch.empty(n, dtype=ref.dtype, device=ref.device)
            self.grads = torch.empty_like(self.params)
            self.exp_avg = torch.zeros_like(self.params)
            self.exp_avg_sq = torch.zeros_like(self.params)
            step_dtype = first["step"].dtype if "step" in first else torch.get_default_dtype()
            self.steps = torch.full((len(params),), steps[0], dtype=step_dtype)
            for i, (p, view, m, v) in enumerate(
                zip(
                    params,
                    self.params.split(sizes),
                    self.exp_avg.split(sizes),
                    self.exp_avg_sq.split(sizes),
                    strict=True,
                )
            ):
                view.copy_(p.reshape(-1))
                p.data = view.view_as(p)
                s = state[p]
                if "exp_avg" in s:
                    m.copy_(s["exp_avg"].reshape(-1))
                    v.copy_(s["exp_avg_sq"].reshape(-1))
                state[p] = {"step": self.steps[i], "exp_avg": m.view_as(p), "exp_avg_sq": v.view_as(p)}
            self.grad_views = [g.view_as(p) for g, p in zip(self.grads.split(sizes), params, strict=True)]
        self.state, self.group, self.param_list = state, group, list(params)
        self.ptrs = [p.data_ptr() for p in params]

    def bind_grads(self) -> bool:
        """Make every parameter's ``.grad`` its view of :attr:`grads` (copying a gradient set elsewhere in);
        False when a parameter has no gradient."""
        views = self.grad_views
        if all(p.grad is v for p, v in zip(self.param_list, views, strict=True)):
            return True
        if any(p.grad is None for p in self.param_list):
            return False
        with torch.no_grad():
            for p, v in zip(self.param_list, views, strict=True):
                if p.grad is not v:
                    v.copy_(p.grad)
                    p.grad = v
        return True

    def valid(self, opt: FlatAdam) -> bool:
        group = opt.param_groups[0]
        return (
            opt.state is self.state
            and group is self.group
            and len(group["params"]) == len(self.param_list)
            and all(a is b for a, b in zip(group["params"], self.param_list, strict=True))
            and [p.data_ptr() for p in self.param_list] == self.ptrs
        )


class FlatAdam(torch.optim.Adam):
    """``torch.optim.Adam`` whose update runs as a few ops on one flat buffer instead of ~90 small tensors.

    On the first step the parameters, their gradients and their moments are moved into flat buffers (each
    parameter, its ``.grad`` and its state become views of them, so ``state_dict``, ``load_state_dict``,
    checkpoints and the module see what they see with ``Adam``): :meth:`zero_grad` then zeroes the gradient
    buffer (backward accumulates into the views), and :meth:`clip_grad_norm_` scales it as one tensor. Each
    element goes through the arithmetic of ``Adam(foreach=True)`` (``lerp_``, ``mul_``, ``addcmul_``, ``sqrt``,
    ``div_``, ``add_``, ``addcdiv_`` with the same Python scalars), so the results are the same bit for bit, and
    each parameter's version counter is bumped as an in-place update of it would. The layout is rebuilt when the
    parameters or the state are replaced (a move to another device, ``load_state_dict``); a gradient set
    elsewhere (``module.zero_grad()`` then backward) is copied in. Anything the flat step does not cover (several
    parameter groups, weight decay, AMSGrad, ``maximize``, a tensor learning rate, mixed devices or dtypes, a
    parameter without a gradient, unequal step counts) takes ``Adam``'s own multi-tensor step."""

    def __init__(self, params, lr: float = 1e-3, **kwargs):
        kwargs.pop("foreach", None)
        kwargs.pop("fused", None)
        super().__init__(params, lr=lr, foreach=True, **kwargs)
        self._layout: _FlatLayout | None = None

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._layout = None  # an unpickled or deep-copied optimizer lays its buffers out again

    def _flat(self) -> _FlatLayout | None:
        """The flat layout for this step, built when needed; None when the flat step does not apply."""
        if len(self.param_groups) != 1:
            return None
        group = self.param_groups[0]
        if (
            group["amsgrad"]
            or group["maximize"]
            or group["weight_decay"] != 0
            or group["capturable"]
            or group["differentiable"]
            or isinstance(group["lr"], torch.Tensor)
        ):
            return None
        params = group["params"]
        layout = self._layout
        if layout is not None and layout.valid(self) and layout.bind_grads():
            return layout
        if not params or any(p.grad is None or p.grad.is_sparse for p in params):
            return None
        ref = params[0]
        if any(p.dtype != ref.dtype or p.device != ref.device for p in params) or not ref.is_floating_point():
            return None
        steps = {float(self.state[p]["step"]) if "step" in self.state.get(p, {}) else 0.0 for p in params}
        started = {"exp_avg" in self.state.get(p, {}) for p in params}
        if len(steps) != 1 or len(started) != 1:
            return None
        self._layout = _FlatLayout(self, group, params)
        self._layout.bind_grads()
        return self._layout

    def _bound(self) -> _FlatLayout | None:
        """The layout when it is current and every gradient is its view of the flat buffer, else None."""
        layout = self._layout
        if layout is None or not layout.valid(self):
            return None
        views = layout.grad_views
        return layout if all(p.grad is v for p, v in zip(layout.param_list, views, strict=True)) else None

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero the flat gradient buffer in one op (the gradients stay its views, so the next backward
        accumulates into it); before the first step, or once the layout is stale, ``Adam``'s own."""
        layout = self._bound()
        if layout is None:
            super().zero_grad(set_to_none)
            return
        layout.grads.zero_()

    @torch.no_grad()
    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """``torch.nn.utils.clip_grad_norm_`` over this optimizer's parameters (the same norms, the same
        arithmetic), the gradients scaled as one flat buffer; returns the total norm before clipping."""
        layout = self._bound()
        if layout is None:
            return torch.nn.utils.clip_grad_norm_(
                [p for g in self.param_groups for p in g["params"]], max_norm
            )
        total = torch.nn.utils.get_total_norm(layout.grad_views, 2.0)
        coef = float(max_norm) / (total + 1e-6)
        layout.grads.mul_(torch.clamp(coef, max=1.0))
        return total

    @torch.no_grad()
    def step(self, closure=None):
        layout = self._flat()
        if layout is None:
            return super().step(closure)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        lr, eps = group["lr"], group["eps"]
        layout.steps.add_(1.0)
        step = layout.steps[0].item()
        layout.exp_avg.lerp_(layout.grads, 1 - beta1)
        layout.exp_avg_sq.mul_(beta2)
        layout.exp_avg_sq.addcmul_(layout.grads, layout.grads, value=1 - beta2)
        step_size = (lr / (1 - beta1**step)) * -1
        denom = layout.exp_avg_sq.sqrt()
        denom.div_((1 - beta2**step) ** 0.5)
        denom.add_(eps)
        layout.params.addcdiv_(layout.exp_avg, denom, value=step_size)
        # the parameters' own version counters (caches keyed on them, autograd's checks) see the in-place update
        torch.autograd.graph.increment_version(layout.param_list)
        return loss
