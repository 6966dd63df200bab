"""FlatAdam: the same updates as Adam(foreach=True), bit for bit, on one flat buffer."""

import copy
import pickle

import pytest
import torch
from gpusched_lab.agents.nets.common import FlatAdam, mlp, run_mlp


def _pair(seed: int = 0):
    torch.manual_seed(seed)
    net = torch.nn.ModuleDict({"a": mlp([5, 7, 3]), "b": mlp([3, 4, 1], last_activation=True)})
    return net, copy.deepcopy(net)


def _loss(net, x):
    return run_mlp(net["b"], run_mlp(net["a"], x)).square().mean() - net["a"][0].bias.sum()


def test_flat_adam_matches_adam_bit_for_bit_with_clipping_and_state_round_trip():
    ref, flat = _pair()
    o_ref = torch.optim.Adam(ref.parameters(), lr=1e-2, eps=1e-5, foreach=True)
    o_flat = FlatAdam(flat.parameters(), lr=1e-2, eps=1e-5)
    g = torch.Generator().manual_seed(1)
    for it in range(60):
        x = torch.randn(9, 5, generator=g)
        o_ref.zero_grad()
        _loss(ref, x).backward()
        n_ref = torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        o_ref.step()
        o_flat.zero_grad()
        _loss(flat, x).backward()
        if it % 2:  # torch's clipping on the views, or the optimizer's on the flat buffer: the same
            n_flat = torch.nn.utils.clip_grad_norm_(flat.parameters(), 0.5)
        else:
            n_flat = o_flat.clip_grad_norm_(0.5)
        assert torch.equal(n_ref, n_flat)
        o_flat.step()
        if it == 30:  # gradients set to None by the module: copied into the flat buffer again
            flat.zero_grad()
        if it == 20:  # a state saved and loaded back: the layout is rebuilt from it
            o_flat.load_state_dict(copy.deepcopy(o_flat.state_dict()))
        if it == 40:
            for group in (*o_ref.param_groups, *o_flat.param_groups):
                group["lr"] = 3e-3
    layout = o_flat._layout
    assert layout is not None
    assert all(p.grad is v for p, v in zip(flat.parameters(), layout.grad_views, strict=True))
    for (name, p), q in zip(ref.named_parameters(), flat.parameters(), strict=True):
        assert torch.equal(p, q), name
    s_ref, s_flat = o_ref.state_dict()["state"], o_flat.state_dict()["state"]
    assert s_ref.keys() == s_flat.keys()
    for i in s_ref:
        for k in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(s_ref[i][k], s_flat[i][k]), (i, k)
    assert float(s_flat[0]["step"]) == 60.0


def test_flat_adam_bumps_parameter_versions_and_loads_an_adam_state():
    ref, flat = _pair(3)
    o_ref = torch.optim.Adam(ref.parameters(), lr=1e-2, foreach=True)
    x = torch.randn(4, 5)
    for _ in range(3):
        o_ref.zero_grad()
        _loss(ref, x).backward()
        o_ref.step()
    flat.load_state_dict(ref.state_dict())
    o_flat = FlatAdam(flat.parameters(), lr=1e-2)
    o_flat.load_state_dict(copy.deepcopy(o_ref.state_dict()))  # an Adam's state, as a checkpoint holds it
    for net, opt in ((ref, o_ref), (flat, o_flat)):
        opt.zero_grad()
        _loss(net, x).backward()
    versions = [p._version for p in flat.parameters()]
    o_ref.step()
    o_flat.step()
    # caches keyed on version counters (the GNN's link terms) must see the update
    assert all(p._version > v for p, v in zip(flat.parameters(), versions, strict=True))
    for p, q in zip(ref.parameters(), flat.parameters(), strict=True):
        assert torch.equal(p, q)


def test_flat_adam_falls_back_without_a_gradient():
    ref, flat = _pair(5)
    o_ref = torch.optim.Adam(ref.parameters(), lr=1e-2, foreach=True)
    o_flat = FlatAdam(flat.parameters(), lr=1e-2)
    x = torch.randn(4, 5)
    for net, opt in ((ref, o_ref), (flat, o_flat)):
        opt.zero_grad()
        run_mlp(net["a"], x).sum().backward()  # net "b" gets no gradient: Adam skips it
        opt.step()
    assert o_flat._layout is None
    for p, q in zip(ref.parameters(), flat.parameters(), strict=True):
        assert torch.equal(p, q)


@pytest.mark.parametrize("kwargs", [{"weight_decay": 0.1}, {"amsgrad": True}])
def test_flat_adam_other_settings_take_adams_step(kwargs):
    ref, flat = _pair(7)
    o_ref = torch.optim.Adam(ref.parameters(), lr=1e-2, foreach=True, **kwargs)
    o_flat = FlatAdam(flat.parameters(), lr=1e-2, **kwargs)
    x = torch.randn(4, 5)
    for _ in range(3):
        for net, opt in ((ref, o_ref), (flat, o_flat)):
            opt.zero_grad()
            _loss(net, x).backward()
            opt.step()
    assert o_flat._layout is None
    for p, q in zip(ref.parameters(), flat.parameters(), strict=True):
        assert torch.equal(p, q)


def test_flat_adam_pickled_lays_its_buffers_out_again():
    ref, flat = _pair(9)
    o_ref = torch.optim.Adam(ref.parameters(), lr=1e-2, foreach=True)
    o_flat = FlatAdam(flat.parameters(), lr=1e-2)
    x = torch.randn(4, 5)
    for step in range(4):
        if step == 2:  # the optimizer and its parameters pickled together, as a whole training state is
            flat, o_flat = pickle.loads(pickle.dumps((flat, o_flat)))
            assert o_flat._layout is None
        for net, opt in ((ref, o_ref), (flat, o_flat)):
            opt.zero_grad()
            _loss(net, x).backward()
            opt.step()
    assert o_flat._layout is not None
    for p, q in zip(ref.parameters(), flat.parameters(), strict=True):
        assert torch.equal(p, q)
