"""Reference CartPole-v1 transitions from the real Gymnasium, for
`shared/env/tests/cartpole_reference.rs`.

Regenerate with:
    python3 -m venv /tmp/gymvenv && /tmp/gymvenv/bin/pip install gymnasium
    /tmp/gymvenv/bin/python shared/env/tests/data/cartpole_reference.py

It sets the (float64) state explicitly, takes one step with each action and
prints the float32 observation Gymnasium returns, the float64 state it keeps,
the reward and both flags, as Rust literals to paste into the test. It also
checks that the `TimeLimit` wrapper truncates exactly at step 500.
"""

import gymnasium as gym
import numpy as np

STATES = [
    (0.0, 0.0, 0.0, 0.0),
    (0.01, -0.02, 0.03, 0.04),
    (-0.5, 1.2, -0.1, -0.8),
    (1.0, -0.5, 0.15, 1.5),
    (-2.0, -1.0, 0.2, 2.0),
    # Terminates: x crosses +2.4 this step.
    (2.39, 1.0, 0.0, 0.0),
    # Terminates: theta crosses -12 degrees this step.
    (0.0, 0.0, -0.205, -1.0),
]

env = gym.make("CartPole-v1")
print(f"// gymnasium {gym.__version__}")
print("// (state, action, obs f32, next state f64, reward, terminated, truncated)")
for state in STATES:
    for action in (0, 1):
        env.reset(seed=0)
        env.unwrapped.state = np.array(state, dtype=np.float64)
        obs, reward, terminated, truncated, _ = env.step(action)
        nxt = env.unwrapped.state
        f = lambda v: ", ".join(repr(float(x)) for x in v)
        print(
            f"Case {{ state: [{f(state)}], action: {action}, "
            f"obs: [{', '.join(repr(float(np.float32(x))) for x in obs)}], "
            f"next: [{f(nxt)}], reward: {float(reward)!r}, "
            f"terminated: {str(terminated).lower()}, truncated: {str(truncated).lower()} }},"
        )

# Truncation: keep the pole upright by resetting the state before every step
# (this does not reset TimeLimit's step counter).
env.reset(seed=0)
truncated_at = None
for t in range(1, 501):
    env.unwrapped.state = np.zeros(4)
    _, _, terminated, truncated, _ = env.step(t % 2)
    assert not terminated
    if truncated:
        truncated_at = t
        break
print(f"// truncated at step {truncated_at}")
