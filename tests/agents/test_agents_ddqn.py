"""Double DQN: the exact double-Q target with masks, n-step transitions, smoke training with every encoder, and
bit-for-bit continuation from a saved training state."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from gpusched_lab.agents.algos.ddqn import DDQN, DDQNArgs, double_q_targets
from gpusched_lab.agents.common import make_env
from gpusched_lab.agents.nets.networks import ENCODERS, OBS_MODE_OF_ENCODER

TINY = {"cluster": "tiny", "num_jobs": 10, "load": 0.9}
SMALL_ARGS = dict(
    hidden=16,
    buffer_size=400,
    batch_size=16,
    learning_starts=40,
    target_update_interval=30,
    train_frequency=2,
    device="cpu",
)


def test_double_q_target_matches_hand_computation():
    # 3 transitions, 4 actions. Online net on s' picks the argmax among valid next actions, target net evaluates it.
    q_online_next = torch.tensor(
        [
            [1.0, 9.0, 3.0, 2.0],  # 9 is masked: best valid is action 2 (3.0)
            [5.0, 1.0, 0.0, 4.0],  # all valid: action 0
            [0.0, 0.0, 7.0, 1.0],
        ]
    )  # terminated: no bootstrap
    q_target_next = torch.tensor(
        [[10.0, 20.0, 30.0, 40.0], [-1.0, -2.0, -3.0, -4.0], [100.0, 100.0, 100.0, 100.0]]
    )
    next_mask = torch.tensor([[1, 0, 1, 1], [1, 1, 1, 1], [0, 0, 1, 0]])
    returns = torch.tensor([0.5, -1.0, 2.0])
    discounts = torch.tensor([0.9, 0.81, 0.0])
    y = double_q_targets(q_online_next, q_target_next, next_mask, returns, discounts)
    expected = torch.tensor([0.5 + 0.9 * 30.0, -1.0 + 0.81 * -1.0, 2.0])
    assert torch.equal(y, expected)
    # plain DQN (max of the target net) would give 0.5 + 0.9·40 = 36.5 on the first row: double-Q differs
    assert y[0] != 0.5 + 0.9 * 40.0


def test_masked_target_never_evaluates_an_invalid_action():
    q_online_next = torch.tensor([[0.0, 100.0]])
    q_target_next = torch.tensor([[1.0, -100.0]])
    y = double_q_targets(q_online_next, q_target_next, torch.tensor([[1, 0]]), torch.zeros(1), torch.ones(1))
    assert y.item() == 1.0


def test_n_step_transitions_written_with_discounted_sums():
    env = make_env("gpusched/JobSelect-v1", TINY, "flat")
    algo = DDQN(DDQNArgs(encoder="mlp", n_step=3, gamma=0.5, **SMALL_ARGS), [env])
    obs = [{"action_mask": np.ones(3, np.int8), "obs": np.full(2, i, np.float32)} for i in range(5)]

    class Buf:
        rows: list = []

        def add(self, o, a, ret, disc, nxt, demo=False):
            self.rows.append((float(o["obs"][0]), a, ret, disc, float(nxt["obs"][0])))

    algo.buffer = Buf()
    algo._push(0, obs[0], 0, 1.0, obs[1], False, False)
    algo._push(0, obs[1], 1, 2.0, obs[2], False, False)
    assert Buf.rows == []
    algo._push(0, obs[2], 2, 4.0, obs[3], False, False)
    assert Buf.rows == [(0.0, 0, 1.0 + 0.5 * 2.0 + 0.25 * 4.0, 0.125, 3.0)]
    algo._push(0, obs[3], 0, 8.0, obs[4], True, True)  # terminal: flush the window, no bootstrap
    assert Buf.rows[1:] == [
        (1.0, 1, 2.0 + 0.5 * 4.0 + 0.25 * 8.0, 0.0, 4.0),
        (2.0, 2, 4.0 + 0.5 * 8.0, 0.0, 4.0),
        (3.0, 0, 8.0, 0.0, 4.0),
    ]


@pytest.mark.parametrize("env_id", ["gpusched/JobSelect-v1", "gpusched/WorkerPlacement-v1"])
@pytest.mark.parametrize("encoder", ENCODERS)
def test_trains_a_few_hundred_steps(env_id, encoder):
    envs = [make_env(env_id, TINY, OBS_MODE_OF_ENCODER[encoder]) for _ in range(2)]
    algo = DDQN(DDQNArgs(encoder=encoder, n_step=2, **SMALL_ARGS), envs).learn(200)
    assert algo.global_step == 200 and algo.updates > 0
    assert np.isfinite(algo.last_loss)
    assert algo.finished_episodes, "tiny episodes should end within 200 steps"
    assert algo.epsilon < 1.0


def _params(algo):
    return {k: v.clone() for k, v in algo.q.state_dict().items()}


@pytest.mark.parametrize("encoder", ["mlp", "gnn"])
def test_resume_from_training_state_is_bit_for_bit(encoder):
    mode = OBS_MODE_OF_ENCODER[encoder]
    args = DDQNArgs(encoder=encoder, n_step=3, seed=3, **SMALL_ARGS)

    def fresh():
        return DDQN(args, [make_env("gpusched/JobSelect-v1", TINY, mode) for _ in range(2)], total_steps=240)

    straight = fresh().learn(240)
    first = fresh().learn(130)  # stops mid-episode, mid n-step window
    buf = io.BytesIO()
    torch.save(first.training_state(), buf)
    torch.manual_seed(999)
    np.random.seed(999)  # noqa: NPY002 - the restored state must not depend on what ran in between
    second = fresh()
    second.load_training_state(torch.load(io.BytesIO(buf.getvalue()), weights_only=False))
    second.learn(240)
    a, b = _params(straight), _params(second)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert straight.updates == second.updates
    assert np.array_equal(straight.buffer.actions, second.buffer.actions)


def test_polyak_target_update():
    env = make_env("gpusched/JobSelect-v1", TINY, "flat")
    algo = DDQN(DDQNArgs(encoder="mlp", tau=0.25, **SMALL_ARGS), [env])
    with torch.no_grad():
        for p in algo.q.parameters():
            p.add_(1.0)
    before = [p.clone() for p in algo.q_target.parameters()]
    algo._update_target()
    for b, t, q in zip(before, algo.q_target.parameters(), algo.q.parameters(), strict=True):
        torch.testing.assert_close(t, 0.75 * b + 0.25 * q)


# ---------------------------------------------------------------------------------- behaviour-cloning warm start
def test_large_margin_loss_matches_hand_computation():
    from gpusched_lab.agents.algos.ddqn import large_margin_loss

    q = torch.tensor([[1.0, 2.0, 0.0, 5.0], [3.0, 1.0, 2.9, 0.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])  # action 3 invalid in row 0: its 5.0 never counts
    expert = torch.tensor([1, 0])
    # row 0: max(1 + .5, 2, 0 + .5) - 2 = 0; row 1: max(3, 1.5, 3.4, .5) - 3 = 0.4
    got = large_margin_loss(q, mask, expert, 0.5)
    torch.testing.assert_close(got, torch.tensor([0.0, 0.4]))


def _wp_bc_algo(**kw):
    envs = [make_env("gpusched/WorkerPlacement-v1", TINY, "flat") for _ in range(2)]
    args = DDQNArgs(
        encoder="mlp", bc_from="closest", bc_demo_steps=150, bc_margin=0.5, **{**SMALL_ARGS, **kw}
    )
    return DDQN(args, envs, total_steps=60)


def test_bc_pretraining_clones_the_expert_and_flags_demonstrations():
    algo = _wp_bc_algo(bc_steps=400, bc_learning_rate=2e-3, learning_rate=1e-4, buffer_size=400)
    stats = algo.pretrain()
    assert algo.optimizer.param_groups[0]["lr"] == 1e-4  # fine-tuning goes on with its own step size
    n = stats["demo_steps"]
    assert n >= 150 and algo.buffer.demo[:n].all() and not algo.buffer.demo[n:].any()
    assert np.isfinite(stats["loss"]) and algo.updates == 400
    # the greedy policy now agrees with the expert on the states of a fresh episode the expert plays
    env = make_env("gpusched/WorkerPlacement-v1", TINY, "flat")
    obs, _ = env.reset(seed=12345)
    agree = total = 0
    while True:
        expert = env.unwrapped.heuristic_action("closest")
        greedy = int(algo.greedy({k: v[None] for k, v in obs.items()})[0])
        agree, total = agree + (greedy == expert), total + 1
        obs, _, terminated, truncated, _ = env.step(expert)
        if terminated or truncated:
            break
    assert agree / total >= 0.9, f"agreement {agree}/{total}"
    # then RL continues from the run's own seeds; later transitions are not demonstrations
    algo.learn(60)
    assert algo.global_step == 60 and not algo.buffer.demo[n : n + 60].any()


def test_bc_without_an_expert_says_so():
    envs = [make_env("gpusched/JobSelect-v1", TINY, "flat")]
    algo = DDQN(DDQNArgs(encoder="mlp", bc_from="closest", bc_steps=1, **SMALL_ARGS), envs)
    with pytest.raises(ValueError, match="heuristic_action"):
        algo.learn(10)


def test_bc_resume_keeps_demonstration_flags():
    algo = _wp_bc_algo(bc_steps=5)
    algo.learn(30)
    state = algo.training_state()
    buf = io.BytesIO()
    torch.save(state, buf)
    again = _wp_bc_algo(bc_steps=5)
    again.load_training_state(torch.load(io.BytesIO(buf.getvalue()), weights_only=False))
    assert np.array_equal(again.buffer.demo, algo.buffer.demo) and again.buffer.demo.any()
    again.learn(60)  # no second pre-training on resume
    assert again.updates > algo.updates and again.pretrain_stats is None


@pytest.mark.parametrize("num_envs", [1, 3])
def test_epsilon_greedy_skips_the_forward_only_when_every_env_explores(num_envs):
    """The actions and the generator's state after ε-greedy selection equal those of selecting with the greedy
    forward always run first (the draws come in the same order), and the forward runs only when some env acts
    greedily."""
    env_list = [make_env("gpusched/JobSelect-v1", TINY, "flat") for _ in range(num_envs)]
    algo = DDQN(DDQNArgs(encoder="mlp", seed=5, **SMALL_ARGS), env_list)
    obs = [env.reset(seed=i)[0] for i, env in enumerate(env_list)]
    calls = []
    real_greedy = algo.greedy

    def counted(batch):
        calls.append(len(batch["action_mask"]))
        return real_greedy(batch)

    algo.greedy = counted
    for eps in (0.0, 0.3, 0.7, 1.0):
        algo.epsilon = eps
        for _ in range(20):
            state = algo.rng.bit_generator.state
            calls.clear()
            got = algo._select(obs)
            after = algo.rng.bit_generator.state
            # the reference: forward first, then the same draws
            algo.rng.bit_generator.state = state
            greedy = real_greedy({k: np.stack([o[k] for o in obs]) for k in obs[0]})
            want = []
            for i, o in enumerate(obs):
                if algo.rng.random() < eps:
                    valid = np.flatnonzero(o["action_mask"])
                    want.append(int(algo.rng.choice(valid)) if len(valid) else int(greedy[i]))
                else:
                    want.append(int(greedy[i]))
            assert got == want
            assert algo.rng.bit_generator.state == after
            if eps == 0.0:
                assert calls == [num_envs]
            if eps == 1.0:
                assert calls == []
