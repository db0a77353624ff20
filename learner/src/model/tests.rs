//! The model's shapes, heads, file format and burn-in, on the CPU.
use candle_core::{DType, Device, Result, Tensor};
use seed_shared::{EnvSpec, ObsDType};

use super::*;

fn cartpole_config() -> ModelConfig {
    ModelConfig::for_spec(&EnvSpec::cartpole())
}

#[test]
fn mlp_step_shapes() -> Result<()> {
    let m = TrainableModel::new(&cartpole_config(), &Device::Cpu, 1)?;
    let obs = Tensor::zeros((5, 4), DType::F32, &Device::Cpu)?;
    let out = m.model.step(&obs, None)?;
    assert_eq!(out.policy_params.dims(), &[5, 2]);
    assert_eq!(out.values.dims(), &[5]);
    assert!(out.state.is_none());
    Ok(())
}

#[test]
fn unroll_matches_step_for_feed_forward() -> Result<()> {
    let m = TrainableModel::new(&cartpole_config(), &Device::Cpu, 2)?;
    let obs = Tensor::randn(0f32, 1.0, (3, 2, 4), &Device::Cpu)?;
    let starts = Tensor::zeros((3, 2), DType::F32, &Device::Cpu)?;
    let u = m.model.unroll(&obs, &starts, None)?;
    assert_eq!(u.policy_params.dims(), &[3, 2, 2]);
    let s = m.model.step(&obs.get(1)?, None)?;
    let diff = (u.policy_params.get(1)? - s.policy_params)?
        .abs()?
        .max_all()?
        .to_scalar::<f32>()?;
    assert!(diff < 1e-6, "{diff}");
    Ok(())
}

/// Burn-in steps give the same Q-values as a plain unroll, but no
/// gradient: the loss on the later steps reaches the burn-in
/// observations only through a plain unroll.
#[test]
fn burn_in_steps_get_no_gradient() -> Result<()> {
    let cfg = ModelConfig {
        lstm_size: Some(8),
        ..cartpole_config()
    };
    let m = TrainableModel::new(&cfg, &Device::Cpu, 3)?;
    let d = Device::Cpu;
    let (t1, b, burn_in) = (6, 3, 2);
    let obs = candle_core::Var::from_tensor(&Tensor::randn(0f32, 1.0, (t1, b, 4), &d)?)?;
    let starts = Tensor::zeros((t1, b), DType::F32, &d)?;
    let q_sum = |u: &PolicyUnroll| dueling_q(&u.policy_params, &u.values)?.sum_all();
    let after = m
        .model
        .unroll_after_burn_in(obs.as_tensor(), &starts, None, burn_in)?;
    assert_eq!(after.values.dims(), &[t1 - burn_in, b]);
    let plain = m.model.unroll(obs.as_tensor(), &starts, None)?;
    let plain_tail = PolicyUnroll {
        policy_params: plain.policy_params.narrow(0, burn_in, t1 - burn_in)?,
        values: plain.values.narrow(0, burn_in, t1 - burn_in)?,
    };
    let diff = (&after.values - &plain_tail.values)?
        .abs()?
        .max_all()?
        .to_scalar::<f32>()?;
    assert!(diff < 1e-6, "burn-in must not change the values: {diff}");
    let per_step =
        |grad: &Tensor| -> Result<Vec<f32>> { grad.abs()?.sum((1, 2))?.to_vec1::<f32>() };
    let g = q_sum(&after)?.backward()?;
    let g = per_step(g.get(&obs).expect("observations reach the loss"))?;
    assert!(g[..burn_in].iter().all(|&v| v == 0.0), "{g:?}");
    assert!(g[burn_in..].iter().all(|&v| v > 0.0), "{g:?}");
    let g = q_sum(&plain_tail)?.backward()?;
    let g = per_step(g.get(&obs).expect("observations reach the loss"))?;
    assert!(
        g[..burn_in].iter().all(|&v| v > 0.0),
        "without burn-in: {g:?}"
    );
    Ok(())
}

#[test]
fn dueling_q_centres_the_advantages() -> Result<()> {
    let d = Device::Cpu;
    let a = Tensor::new(&[[1f32, 3.0], [0.0, 0.0]], &d)?;
    let v = Tensor::new(&[10f32, -1.0], &d)?;
    let q = dueling_q(&a, &v)?.to_vec2::<f32>()?;
    assert_eq!(q, vec![vec![9.0, 11.0], vec![-1.0, -1.0]]);
    Ok(())
}

#[test]
fn same_seed_same_weights_and_snapshot_is_frozen() -> Result<()> {
    let cfg = cartpole_config();
    let a = TrainableModel::new(&cfg, &Device::Cpu, 7)?;
    let b = TrainableModel::new(&cfg, &Device::Cpu, 7)?;
    let c = TrainableModel::new(&cfg, &Device::Cpu, 8)?;
    let obs = Tensor::ones((1, 4), DType::F32, &Device::Cpu)?;
    let la = a
        .model
        .step(&obs, None)?
        .policy_params
        .flatten_all()?
        .to_vec1::<f32>()?;
    let lb = b
        .model
        .step(&obs, None)?
        .policy_params
        .flatten_all()?
        .to_vec1::<f32>()?;
    let lc = c
        .model
        .step(&obs, None)?
        .policy_params
        .flatten_all()?
        .to_vec1::<f32>()?;
    assert_eq!(la, lb);
    assert_ne!(la, lc);

    let snap = a.snapshot()?;
    for var in a.varmap.all_vars() {
        var.set(&var.as_tensor().zeros_like()?)?;
    }
    let ls = snap
        .step(&obs, None)?
        .policy_params
        .flatten_all()?
        .to_vec1::<f32>()?;
    assert_eq!(ls, la, "snapshot must not see later updates");
    Ok(())
}

fn pendulum_like_config() -> ModelConfig {
    ModelConfig::for_spec(&EnvSpec {
        env_name: "Pendulum-v1".into(),
        obs_shape: vec![3],
        obs_dtype: ObsDType::F32,
        action: seed_shared::ActionSpace::uniform_box(2, -2.0, 2.0),
    })
}

#[test]
fn weight_names_follow_the_action_kind() -> Result<()> {
    let names = |cfg: &ModelConfig| -> Result<Vec<(String, Vec<usize>)>> {
        let m = TrainableModel::new(cfg, &Device::Cpu, 1)?;
        let mut v: Vec<_> = m
            .named_tensors()?
            .into_iter()
            .map(|(n, t)| (n, t.dims().to_vec()))
            .collect();
        v.sort();
        Ok(v)
    };
    let discrete = names(&cartpole_config())?;
    let want = [
        ("policy.bias", vec![2]),
        ("policy.weight", vec![2, 64]),
        ("torso.0.bias", vec![64]),
        ("torso.0.weight", vec![64, 4]),
        ("torso.1.bias", vec![64]),
        ("torso.1.weight", vec![64, 64]),
        ("value.bias", vec![1]),
        ("value.weight", vec![1, 64]),
    ];
    let want: Vec<(String, Vec<usize>)> =
        want.into_iter().map(|(n, d)| (n.to_string(), d)).collect();
    assert_eq!(discrete, want, "discrete checkpoints keep their names");
    let gaussian = names(&pendulum_like_config())?;
    assert_eq!(gaussian[0], ("log_std".to_string(), vec![2]));
    assert_eq!(gaussian[2], ("policy.weight".to_string(), vec![2, 64]));
    Ok(())
}

#[test]
fn gaussian_head_gives_mean_then_clamped_log_std() -> Result<()> {
    let m = TrainableModel::new(&pendulum_like_config(), &Device::Cpu, 2)?;
    let obs = Tensor::randn(0f32, 1.0, (3, 2, 3), &Device::Cpu)?;
    let starts = Tensor::zeros((3, 2), DType::F32, &Device::Cpu)?;
    let u = m.model.unroll(&obs, &starts, None)?;
    assert_eq!(u.policy_params.dims(), &[3, 2, 4]);
    let s = m.model.step(&obs.get(1)?, None)?;
    assert_eq!(s.policy_params.dims(), &[2, 4]);
    let diff = (u.policy_params.get(1)? - &s.policy_params)?
        .abs()?
        .max_all()?
        .to_scalar::<f32>()?;
    assert!(diff < 1e-6, "{diff}");
    let p = s.policy_params.to_vec2::<f32>()?;
    assert_eq!(&p[0][2..], &[0.0, 0.0], "log σ starts at LOG_STD_INIT");
    assert_eq!(&p[1][2..], &[0.0, 0.0], "and does not depend on the state");
    assert!(p[0][0].abs() < 0.1, "policy gain 0.01: mean near 0");

    let var = |name: &str| -> Result<candle_core::Var> {
        let data = m
            .varmap
            .data()
            .lock()
            .map_err(|_| candle_core::Error::Msg("variable map lock poisoned".into()))?;
        data.get(name)
            .cloned()
            .ok_or_else(|| candle_core::Error::Msg(format!("no variable {name}")))
    };
    let log_std = var("log_std")?;
    log_std.set(&Tensor::new(&[9f32, -9.0], &Device::Cpu)?)?;
    let p = m
        .model
        .step(&obs.get(0)?, None)?
        .policy_params
        .to_vec2::<f32>()?;
    assert_eq!(
        &p[0][2..],
        &[distribution::LOG_STD_MAX, distribution::LOG_STD_MIN]
    );

    // Gradient of a log-probability reaches both heads' variables.
    log_std.set(&Tensor::new(&[0.3f32, -0.2], &Device::Cpu)?)?;
    let params = m.model.step(&obs.get(0)?, None)?.policy_params;
    let actions = Tensor::new(&[[1f32, -1.0], [0.5, 0.5]], &Device::Cpu)?;
    let lp = ActionDistribution::Gaussian { dim: 2 }
        .over(&params)?
        .log_prob(&actions)?;
    let grads = lp.sum_all()?.backward()?;
    for name in ["log_std", "policy.weight", "policy.bias", "torso.0.weight"] {
        let g = grads
            .get(var(name)?.as_tensor())
            .ok_or_else(|| candle_core::Error::Msg(format!("no gradient for {name}")))?;
        let norm = g.sqr()?.sum_all()?.to_scalar::<f32>()?;
        assert!(norm > 0.0 && norm.is_finite(), "{name}: {norm}");
    }
    Ok(())
}

/// Largest `|a - b|` over `max |b|`: the error relative to the
/// output's scale (the policy head's gain of 0.01 makes logits small).
fn relative_error(a: &Tensor, b: &Tensor) -> Result<f32> {
    let diff = (a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
    let scale = b.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
    Ok(diff / scale.max(f32::MIN_POSITIVE))
}

/// bf16 keeps 8 significant bits: each rounding of a weight, an input
/// or a layer's output is off by at most 2^-9 (0.2%) relative. A
/// layer rounds about four times (input, weight, output, activation),
/// so 3 to 5 layers (torso, LSTM gates and cell, head) make 12 to 20
/// roundings, 2.5-4% of the terms' scale in the worst case; where a
/// head's terms cancel, the error is relative to the terms rather
/// than to the smaller sum (the LSTM's values: 3.5% of their largest
/// value). 5% bounds that; a real bug (a wrong or missing weight, a
/// lost input scale) is off by the output's whole scale.
const BF16_TOLERANCE: f32 = 0.05;

/// Runs `cfg` in f32 and through a bf16 snapshot of the same weights;
/// returns the relative errors of the policy parameters and values.
fn bf16_against_f32(cfg: &ModelConfig, obs: &Tensor) -> Result<(f32, f32)> {
    let m = TrainableModel::new(cfg, &Device::Cpu, 5)?;
    let full = m.snapshot()?;
    let half = m.snapshot_as(DType::BF16)?;
    assert_eq!(half.dtype(), DType::BF16);
    let (a, b) = (half.step(obs, None)?, full.step(obs, None)?);
    assert_eq!(a.policy_params.dtype(), DType::F32, "outputs are f32");
    assert_eq!(a.values.dtype(), DType::F32);
    if let (Some(sa), Some(sb)) = (&a.state, &b.state) {
        assert_eq!(sa.h.dtype(), DType::F32);
        assert!(relative_error(&sa.h, &sb.h)? < BF16_TOLERANCE);
        assert!(relative_error(&sa.c, &sb.c)? < BF16_TOLERANCE);
    }
    Ok((
        relative_error(&a.policy_params, &b.policy_params)?,
        relative_error(&a.values, &b.values)?,
    ))
}

#[test]
fn bf16_inference_stays_close_to_f32_mlp_and_lstm() -> Result<()> {
    // Fixed observations in [-2, 2) (a random draw failed the bound now
    // and then, where one value's terms cancelled).
    let xs: Vec<f32> = (0..64 * 4u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 16) as f32 / 16384.0 - 2.0)
        .collect();
    let obs = Tensor::from_vec(xs, (64, 4), &Device::Cpu)?;
    let (p, v) = bf16_against_f32(&cartpole_config(), &obs)?;
    assert!(p < BF16_TOLERANCE && v < BF16_TOLERANCE, "mlp: {p} {v}");
    assert!(p > 0.0, "the bf16 copy really is bf16");
    let mut lstm = cartpole_config();
    lstm.lstm_size = Some(32);
    let (p, v) = bf16_against_f32(&lstm, &obs)?;
    assert!(p < BF16_TOLERANCE && v < BF16_TOLERANCE, "lstm: {p} {v}");
    Ok(())
}

#[test]
fn bf16_inference_stays_close_to_f32_conv_torso() -> Result<()> {
    let spec = EnvSpec::synthetic(vec![4, 84, 84], ObsDType::U8, 6);
    let frames: Vec<u8> = (0..8 * 4 * 84 * 84)
        .map(|i| ((i * 2_654_435_761usize) >> 7) as u8)
        .collect();
    let obs = Tensor::from_vec(frames, (8, 4, 84, 84), &Device::Cpu)?;
    let (p, v) = bf16_against_f32(&ModelConfig::for_spec(&spec), &obs)?;
    assert!(p < BF16_TOLERANCE && v < BF16_TOLERANCE, "conv: {p} {v}");
    let small = EnvSpec::synthetic(vec![4, 10, 10], ObsDType::U8, 3);
    let obs = Tensor::from_vec(
        (0..16 * 400).map(|i| (i % 2) as u8).collect::<Vec<u8>>(),
        (16, 4, 10, 10),
        &Device::Cpu,
    )?;
    let (p, v) = bf16_against_f32(&ModelConfig::for_spec(&small), &obs)?;
    assert!(
        p < BF16_TOLERANCE && v < BF16_TOLERANCE,
        "minatar conv: {p} {v}"
    );
    Ok(())
}

#[test]
fn conv_torso_takes_u8_frames() -> Result<()> {
    let spec = EnvSpec::synthetic(vec![4, 84, 84], ObsDType::U8, 6);
    let m = TrainableModel::new(&ModelConfig::for_spec(&spec), &Device::Cpu, 3)?;
    let obs = Tensor::zeros((2, 4, 84, 84), DType::U8, &Device::Cpu)?;
    let out = m.model.step(&obs, None)?;
    assert_eq!(out.policy_params.dims(), &[2, 6]);
    Ok(())
}

#[test]
fn lstm_unroll_matches_stepping_with_resets() -> Result<()> {
    let mut cfg = cartpole_config();
    cfg.lstm_size = Some(8);
    let m = TrainableModel::new(&cfg, &Device::Cpu, 4)?;
    let dev = Device::Cpu;
    let obs = Tensor::randn(0f32, 1.0, (4, 2, 4), &dev)?;
    // Env 1 starts a new episode at step 2.
    let starts = Tensor::new(&[[0f32, 0.], [0., 0.], [0., 1.], [0., 0.]], &dev)?;
    let init = RecurrentState {
        h: Tensor::randn(0f32, 1.0, (2, 8), &dev)?,
        c: Tensor::randn(0f32, 1.0, (2, 8), &dev)?,
    };
    let u = m.model.unroll(&obs, &starts, Some(&init))?;

    // Step env 1 alone, zeroing its state at step 2 by hand.
    let mut state = RecurrentState {
        h: init.h.get(1)?.unsqueeze(0)?,
        c: init.c.get(1)?.unsqueeze(0)?,
    };
    for t in 0..4 {
        if t == 2 {
            state = RecurrentState {
                h: state.h.zeros_like()?,
                c: state.c.zeros_like()?,
            };
        }
        let o = obs.get(t)?.get(1)?.unsqueeze(0)?;
        let s = m.model.step(&o, Some(&state))?;
        let want = u.policy_params.get(t)?.get(1)?;
        let diff = (s.policy_params.squeeze(0)? - want)?
            .abs()?
            .max_all()?
            .to_scalar::<f32>()?;
        assert!(diff < 1e-5, "step {t}: {diff}");
        state = s
            .state
            .ok_or_else(|| candle_core::Error::Msg("no state".into()))?;
    }
    Ok(())
}
