"""Space mapping (seed_rs.spaces): pure Python, no learner, no extension needed."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from seed_rs.spaces import (
    BoxActions,
    DiscreteActions,
    UnsupportedSpaceError,
    action_spec,
    env_name_of,
    env_spec,
    observation_layout,
)


@pytest.mark.parametrize(
    "dtype, wire, converts",
    [
        (np.float32, "f32", False),
        (np.float64, "f32", True),
        (np.float16, "f32", True),
        (np.uint8, "u8", False),
        (np.bool_, "u8", True),
        (np.int64, "f32", True),
        (np.int8, "f32", True),
        (np.uint16, "f32", True),
    ],
)
def test_box_observation_dtypes_map_to_the_wire(dtype, wire, converts):
    space = spaces.Box(0, 1, shape=(3, 2), dtype=dtype)
    layout = observation_layout(space)
    assert (layout.dtype, layout.shape, layout.needs_conversion) == (wire, (3, 2), converts)
    obs = space.sample()
    got = layout.to_array(obs)
    assert got.dtype == layout.wire_dtype and got.shape == (3, 2)
    # bool goes at full intensity (see test_bool_becomes_u8_zero_or_full_intensity).
    want = obs.astype(layout.wire_dtype) * (255 if dtype is np.bool_ else 1)
    np.testing.assert_array_equal(got, want)
    assert len(layout.to_bytes(obs)) == layout.nbytes


def test_float64_is_cast_to_f32():
    layout = observation_layout(spaces.Box(-1e3, 1e3, shape=(2,), dtype=np.float64))
    got = layout.to_array(np.array([0.1, -2.5e2]))
    np.testing.assert_array_equal(got, np.array([0.1, -2.5e2], dtype=np.float32))


def test_bool_becomes_u8_zero_or_full_intensity():
    # The learner scales u8 by 1/255: True must arrive as 255 to be seen as 1.
    layout = observation_layout(spaces.Box(0, 1, shape=(4,), dtype=bool))
    assert layout.dtype == "u8"
    assert layout.to_bytes(np.array([True, False, False, True])) == bytes([255, 0, 0, 255])


def test_channels_last_transposes_hwc_to_chw():
    space = spaces.Box(0, 255, shape=(5, 7, 3), dtype=np.uint8)
    layout = observation_layout(space, channels_last=True)
    assert layout.shape == (3, 5, 7) and layout.transpose == (2, 0, 1)
    hwc = np.arange(5 * 7 * 3, dtype=np.uint8).reshape(5, 7, 3)
    chw = layout.to_array(hwc)
    assert chw.shape == (3, 5, 7)
    for c in range(3):
        np.testing.assert_array_equal(chw[c], hwc[:, :, c])


def test_minatar_like_bool_hwc_frames_become_u8_chw():
    space = spaces.Box(0, 1, shape=(10, 10, 4), dtype=bool)
    layout = observation_layout(space, channels_last=True)
    assert (layout.shape, layout.dtype) == ((4, 10, 10), "u8")
    frame = np.zeros((10, 10, 4), dtype=bool)
    frame[2, 3, 1] = True
    chw = layout.to_array(frame)
    assert chw[1, 2, 3] == 255 and int(chw.sum()) == 255


def test_a_shape_that_looks_channels_last_is_refused_unless_told():
    space = spaces.Box(0, 255, shape=(84, 84, 4), dtype=np.uint8)
    with pytest.raises(UnsupportedSpaceError, match="channels_last=True"):
        observation_layout(space)
    assert observation_layout(space, channels_last=False).shape == (84, 84, 4)
    # Channels-first stacks pass as they are.
    assert observation_layout(spaces.Box(0, 255, shape=(4, 84, 84), dtype=np.uint8)).transpose is None


def test_channels_last_needs_rank_3():
    with pytest.raises(UnsupportedSpaceError, match="rank-3"):
        observation_layout(spaces.Box(0, 1, shape=(4,)), channels_last=True)


def test_scalar_box_becomes_shape_1():
    assert observation_layout(spaces.Box(0, 1, shape=(), dtype=np.float32)).shape == (1,)


@pytest.mark.parametrize(
    "space, name",
    [
        (spaces.Dict({"a": spaces.Box(0, 1, (2,))}), "Dict"),
        (spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))), "Tuple"),
        (spaces.Discrete(5), "Discrete"),
        (spaces.MultiDiscrete([2, 3]), "MultiDiscrete"),
        (spaces.MultiBinary(4), "MultiBinary"),
        (spaces.Text(8), "Text"),
        (spaces.Graph(spaces.Box(0, 1, (2,)), None), "Graph"),
        (spaces.Sequence(spaces.Discrete(2)), "Sequence"),
    ],
)
def test_unsupported_observation_spaces_name_the_space_and_the_supported_ones(space, name):
    with pytest.raises(ValueError, match=name) as e:
        observation_layout(space)
    assert isinstance(e.value, UnsupportedSpaceError)
    assert "supported" in str(e.value)


def test_discrete_actions():
    assert action_spec(spaces.Discrete(6)) == DiscreteActions(6)
    with pytest.raises(UnsupportedSpaceError, match="starts at 1"):
        action_spec(spaces.Discrete(6, start=1))


def test_box_actions_have_per_element_f32_bounds():
    space = spaces.Box(low=np.array([-1.0, 0.0]), high=np.array([1.0, np.inf]), dtype=np.float64)
    a = action_spec(space)
    assert isinstance(a, BoxActions)
    assert (a.shape, a.low, a.high) == ((2,), (-1.0, 0.0), (1.0, float("inf")))
    # The env gets its own dtype and shape, in a fresh writable array.
    action = a.make_action(np.array([0.5, 3.0], dtype="<f4").tobytes())
    assert action.dtype == np.float64 and action.shape == (2,) and action.flags.writeable
    np.testing.assert_array_equal(action, [0.5, 3.0])


@pytest.mark.parametrize(
    "space, name",
    [
        (spaces.MultiDiscrete([2, 3]), "MultiDiscrete"),
        (spaces.MultiBinary(3), "MultiBinary"),
        (spaces.Dict({"a": spaces.Discrete(2)}), "Dict"),
        (spaces.Tuple((spaces.Discrete(2),)), "Tuple"),
        (spaces.Box(0, 3, (2,), dtype=np.int64), "int64"),
    ],
)
def test_unsupported_action_spaces(space, name):
    with pytest.raises(UnsupportedSpaceError, match=name):
        action_spec(space)


def test_env_spec_names_the_env_by_its_gymnasium_id():
    env = gym.make("CartPole-v1")
    spec = env_spec(env)
    assert spec.env_name == "CartPole-v1"
    assert spec.to_native() == {
        "env_name": "CartPole-v1",
        "obs_shape": [4],
        "obs_dtype": "f32",
        "num_actions": 2,
    }
    assert env_spec(env, env_name="cp").env_name == "cp"


def test_env_without_a_registry_id_is_named_by_its_class():
    from gymnasium.envs.classic_control import CartPoleEnv

    assert env_name_of(CartPoleEnv()) == "CartPoleEnv"
