//! CartPole-v1 transitions checked against the real Gymnasium (1.4.0).
//!
//! The numbers below were produced by `tests/data/cartpole_reference.py`
//! (run it to regenerate): for several explicitly set states and both
//! actions, the f32 observation Gymnasium returns, the f64 state it keeps,
//! the reward and the flags. Two states terminate (x past 2.4; θ past -12°),
//! and the time limit truncates exactly at step 500.

use seed_env::{Action, CartPole, Env, CARTPOLE_MAX_EPISODE_STEPS};
use seed_shared::codec::read_f32_le_into;

struct Case {
    state: [f64; 4],
    action: u32,
    obs: [f64; 4],
    next: [f64; 4],
    reward: f64,
    terminated: bool,
    truncated: bool,
}

#[rustfmt::skip]
const CASES: &[Case] = &[
    Case { state: [0.0, 0.0, 0.0, 0.0], action: 0, obs: [0.0, -0.19512194395065308, 0.0, 0.2926829159259796], next: [0.0, -0.1951219512195122, 0.0, 0.2926829268292683], reward: 1.0, terminated: false, truncated: false },
    Case { state: [0.0, 0.0, 0.0, 0.0], action: 1, obs: [0.0, 0.19512194395065308, 0.0, -0.2926829159259796], next: [0.0, 0.1951219512195122, 0.0, -0.2926829268292683], reward: 1.0, terminated: false, truncated: false },
    Case { state: [0.01, -0.02, 0.03, 0.04], action: 0, obs: [0.009600000455975533, -0.21553902328014374, 0.030799999833106995, 0.3419952094554901], next: [0.009600000000000001, -0.21553901710278936, 0.030799999999999998, 0.34199522377603914], reward: 1.0, terminated: false, truncated: false },
    Case { state: [0.01, -0.02, 0.03, 0.04], action: 1, obs: [0.009600000455975533, 0.17467918992042542, 0.030799999833106995, -0.24306872487068176], next: [0.009600000000000001, 0.17467919574755525, 0.030799999999999998, -0.2430687179600081], reward: 1.0, terminated: false, truncated: false },
    Case { state: [-0.5, 1.2, -0.1, -0.8], action: 0, obs: [-0.47600001096725464, 1.0063815116882324, -0.11599999666213989, -0.540374219417572], next: [-0.476, 1.0063815186872245, -0.116, -0.5403742314226418], reward: 1.0, terminated: false, truncated: false },
    Case { state: [-0.5, 1.2, -0.1, -0.8], action: 1, obs: [-0.47600001096725464, 1.39634108543396, -0.11599999666213989, -1.1223912239074707], next: [-0.476, 1.3963410347485, -0.116, -1.1223912455787999], reward: 1.0, terminated: false, truncated: false },
    Case { state: [1.0, -0.5, 0.15, 1.5], action: 0, obs: [0.9900000095367432, -0.6965917944908142, 0.18000000715255737, 1.8355112075805664], next: [0.99, -0.6965917753777977, 0.18, 1.835511203427736], reward: 1.0, terminated: false, truncated: false },
    Case { state: [1.0, -0.5, 0.15, 1.5], action: 1, obs: [0.9900000095367432, -0.3069845139980316, 0.18000000715255737, 1.2576626539230347], next: [0.99, -0.30698450325469573, 0.18, 1.2576625997844155], reward: 1.0, terminated: false, truncated: false },
    Case { state: [-2.0, -1.0, 0.2, 2.0], action: 0, obs: [-2.0199999809265137, -1.1965713500976562, 0.23999999463558197, 2.34738826751709], next: [-2.02, -1.1965713701672875, 0.24000000000000002, 2.347388328345874], reward: 1.0, terminated: true, truncated: false },
    Case { state: [-2.0, -1.0, 0.2, 2.0], action: 1, obs: [-2.0199999809265137, -0.8074512481689453, 0.23999999463558197, 1.7753429412841797], next: [-2.02, -0.8074512514618274, 0.24000000000000002, 1.775342893682617], reward: 1.0, terminated: true, truncated: false },
    Case { state: [2.39, 1.0, 0.0, 0.0], action: 0, obs: [2.4100000858306885, 0.8048780560493469, 0.0, 0.2926829159259796], next: [2.41, 0.8048780487804879, 0.0, 0.2926829268292683], reward: 1.0, terminated: true, truncated: false },
    Case { state: [2.39, 1.0, 0.0, 0.0], action: 1, obs: [2.4100000858306885, 1.1951220035552979, 0.0, -0.2926829159259796], next: [2.41, 1.1951219512195121, 0.0, -0.2926829268292683], reward: 1.0, terminated: true, truncated: false },
    Case { state: [0.0, 0.0, -0.205, -1.0], action: 0, obs: [0.0, -0.19188041985034943, -0.22499999403953552, -0.7780547738075256], next: [0.0, -0.19188041968334946, -0.22499999999999998, -0.7780547961042108], reward: 1.0, terminated: true, truncated: false },
    Case { state: [0.0, 0.0, -0.205, -1.0], action: 1, obs: [0.0, 0.1971837729215622, -0.22499999403953552, -1.3494311571121216], next: [0.0, 0.19718377591168335, -0.22499999999999998, -1.349431157675054], reward: 1.0, terminated: true, truncated: false },
];

#[test]
fn transitions_match_gymnasium() {
    let mut env = CartPole::new();
    let mut obs = [0u8; 16];
    for (i, case) in CASES.iter().enumerate() {
        env.reset(0, &mut obs).unwrap();
        env.set_state(case.state);
        let t = env.step(Action::Discrete(case.action), &mut obs).unwrap();
        let mut got = [0f32; 4];
        read_f32_le_into(&obs, &mut got);
        let state = env.state();
        for (k, ((&obs_k, &want_obs), (&state_k, &want_state))) in got
            .iter()
            .zip(&case.obs)
            .zip(state.iter().zip(&case.next))
            .enumerate()
        {
            assert!(
                (f64::from(obs_k) - want_obs).abs() <= 1e-6,
                "case {i} obs[{k}]: {obs_k} vs gymnasium {want_obs}"
            );
            assert!(
                (state_k - want_state).abs() <= 1e-6,
                "case {i} state[{k}]: {state_k} vs gymnasium {want_state}"
            );
        }
        assert_eq!(f64::from(t.reward), case.reward, "case {i} reward");
        assert_eq!(t.terminated, case.terminated, "case {i} terminated");
        assert_eq!(t.truncated, case.truncated, "case {i} truncated");
    }
    assert!(CASES.iter().filter(|c| c.terminated).count() >= 4);
}

#[test]
fn time_limit_truncates_at_step_500() {
    let mut env = CartPole::new();
    let mut obs = [0u8; 16];
    env.reset(7, &mut obs).unwrap();
    for step in 1..=CARTPOLE_MAX_EPISODE_STEPS {
        // Upright state before every step, as in the generator: never terminates.
        env.set_state([0.0; 4]);
        let t = env.step(Action::Discrete(step % 2), &mut obs).unwrap();
        assert!(!t.terminated, "step {step}");
        assert_eq!(t.truncated, step == 500, "step {step}");
    }
    assert_eq!(CARTPOLE_MAX_EPISODE_STEPS, 500);
}
