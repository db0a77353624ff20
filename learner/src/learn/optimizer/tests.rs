//! The optimizer against the per-variable form, the papers' rules, the
//! schedule, clipping and a state round trip.
use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::VarMap;

use super::state::{adam_m_key, adam_v_key, rmsprop_key};
use super::*;
use crate::learn::vtrace::{impala_loss, ImpalaLossConfig, ImpalaLossInputs};
use candle_nn::Init;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A conv kernel's gradient comes out of candle carrying its backward
/// graph when the layer's input depends on other variables; folded into
/// the moments as is, every step's graph stayed alive (the conv-torso
/// memory leak). The moments must hold plain values.
#[test]
fn moments_never_keep_a_backward_graph() {
    let dev = Device::Cpu;
    let varmap = VarMap::new();
    let vb = candle_nn::VarBuilder::from_varmap(&varmap, DType::F32, &dev);
    let conv1 = candle_nn::conv2d(2, 3, 3, Default::default(), vb.pp("c1")).unwrap();
    let conv2 = candle_nn::conv2d(3, 2, 3, Default::default(), vb.pp("c2")).unwrap();
    let mut opt = Optimizer::new(&varmap, OptimizerConfig::constant_adam(6e-4)).unwrap();
    let x = Tensor::ones((1, 2, 7, 7), DType::F32, &dev).unwrap();
    for _ in 0..2 {
        use candle_core::Module;
        let y = conv2.forward(&conv1.forward(&x).unwrap()).unwrap();
        let grads = y.sqr().unwrap().sum_all().unwrap().backward().unwrap();
        opt.step(&grads).unwrap();
    }
    for (key, t) in opt.state().unwrap() {
        assert!(!t.track_op(), "{key} keeps a backward graph");
    }
}

fn var(data: &[f32]) -> Var {
    Var::from_slice(data, data.len(), &Device::Cpu).unwrap()
}

/// Gradients equal to `g`: backward of `Σ θ ⊙ g`.
fn grads_of(var: &Var, g: &[f32]) -> GradStore {
    let g = Tensor::from_slice(g, g.len(), &Device::Cpu).unwrap();
    (var.as_tensor() * g)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap()
}

fn values(var: &Var) -> Vec<f32> {
    var.as_tensor().to_vec1().unwrap()
}

fn constant(lr: f64, algorithm: Algorithm) -> OptimizerConfig {
    OptimizerConfig {
        algorithm,
        schedule: LrSchedule::Constant { lr },
    }
}

#[test]
fn adam_first_step_moves_each_weight_by_lr_against_its_gradient() {
    // At t = 1, m̂ = g and v̂ = g², so the step is lr · g / (|g| + ε) ≈ lr · sign(g).
    let theta = var(&[1.0, -2.0, 0.5]);
    let mut adam = Optimizer::from_named_vars(
        [("w".to_string(), theta.clone())],
        constant(0.1, Algorithm::Adam(AdamConfig::kingma_ba())),
    )
    .unwrap();
    adam.step(&grads_of(&theta, &[0.5, -3.0, 0.0])).unwrap();
    let got = values(&theta);
    let want = [0.9, -1.9, 0.5];
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "{got:?} vs {want:?}");
    }
}

#[test]
fn adam_matches_hand_computed_steps() {
    let theta = var(&[1.0, -2.0]);
    let config = AdamConfig {
        beta1: 0.8,
        beta2: 0.9,
        eps: 1e-3,
    };
    let mut adam = Optimizer::from_named_vars(
        [("w".to_string(), theta.clone())],
        OptimizerConfig {
            algorithm: Algorithm::Adam(config),
            schedule: LrSchedule::LinearDecay {
                initial: 0.05,
                decay_steps: 10,
                last: 0.0,
            },
        },
    )
    .unwrap();
    let grads = [[0.5, -1.0], [0.1, 0.3], [-0.2, 0.0]];
    let mut want = [1.0f64, -2.0];
    let (mut m, mut v) = ([0.0f64; 2], [0.0f64; 2]);
    for (step, g) in grads.iter().enumerate() {
        let applied = adam.step(&grads_of(&theta, &g.map(|x| x as f32))).unwrap();
        let t = step as i32 + 1;
        let lr = 0.05 * (1.0 - step as f64 / 10.0);
        assert!((applied.learning_rate - lr).abs() < 1e-12);
        for i in 0..2 {
            m[i] = 0.8 * m[i] + 0.2 * g[i];
            v[i] = 0.9 * v[i] + 0.1 * g[i] * g[i];
            let m_hat = m[i] / (1.0 - 0.8f64.powi(t));
            let v_hat = v[i] / (1.0 - 0.9f64.powi(t));
            want[i] -= lr * m_hat / (v_hat.sqrt() + 1e-3);
        }
        let got = values(&theta);
        for i in 0..2 {
            assert!(
                (f64::from(got[i]) - want[i]).abs() < 1e-5,
                "step {t}: {got:?} vs {want:?}"
            );
        }
    }
    assert_eq!(adam.step_count(), 3);
}

#[test]
fn rmsprop_matches_hand_computed_steps() {
    let theta = var(&[0.3]);
    let mut rms = Optimizer::from_named_vars(
        [("w".to_string(), theta.clone())],
        constant(
            0.1,
            Algorithm::RmsProp(RmsPropConfig {
                decay: 0.5,
                eps: 0.01,
            }),
        ),
    )
    .unwrap();
    rms.step(&grads_of(&theta, &[2.0])).unwrap();
    // ms = 0.5 · 4 = 2; θ = 0.3 − 0.1 · 2 / √2.01.
    let after_one = 0.3 - 0.1 * 2.0 / 2.01f64.sqrt();
    assert!((f64::from(values(&theta)[0]) - after_one).abs() < 1e-6);
    rms.step(&grads_of(&theta, &[-1.0])).unwrap();
    // ms = 0.5 · 2 + 0.5 · 1 = 1.5; θ += 0.1 / √1.51.
    let after_two = after_one + 0.1 / 1.51f64.sqrt();
    assert!((f64::from(values(&theta)[0]) - after_two).abs() < 1e-6);
}

/// The update written variable by variable, one op chain per tensor:
/// the form the flat buffers replaced, kept as the reference.
struct PerVariable {
    vars: Vec<Var>,
    moments: Vec<Vec<Tensor>>,
    algorithm: Algorithm,
    lr: f64,
    t: u64,
}

impl PerVariable {
    fn new(vars: &[Var], algorithm: Algorithm, lr: f64) -> Self {
        let kinds = match algorithm {
            Algorithm::Adam(_) => 2,
            Algorithm::RmsProp(_) => 1,
        };
        let moments = vars
            .iter()
            .map(|v| vec![v.as_tensor().zeros_like().unwrap(); kinds])
            .collect();
        Self {
            vars: vars.to_vec(),
            moments,
            algorithm,
            lr,
            t: 0,
        }
    }

    fn step(&mut self, grads: &GradStore) {
        self.t += 1;
        let (t, lr) = (self.t, self.lr);
        for (var, moments) in self.vars.iter().zip(&mut self.moments) {
            let Some(grad) = grads.get(var.as_tensor()) else {
                continue;
            };
            let grad = &grad.detach();
            let update = match self.algorithm {
                Algorithm::Adam(adam) => {
                    let (m, v) = (&moments[0], &moments[1]);
                    let m = (m.affine(adam.beta1, 0.0).unwrap()
                        + grad.affine(1.0 - adam.beta1, 0.0).unwrap())
                    .unwrap();
                    let v = (v.affine(adam.beta2, 0.0).unwrap()
                        + grad.sqr().unwrap().affine(1.0 - adam.beta2, 0.0).unwrap())
                    .unwrap();
                    let e = t as i32;
                    let m_hat = m.affine(1.0 / (1.0 - adam.beta1.powi(e)), 0.0).unwrap();
                    let v_hat = v.affine(1.0 / (1.0 - adam.beta2.powi(e)), 0.0).unwrap();
                    let u = (m_hat / v_hat.sqrt().unwrap().affine(1.0, adam.eps).unwrap())
                        .unwrap()
                        .affine(lr, 0.0)
                        .unwrap();
                    *moments = vec![m, v];
                    u
                }
                Algorithm::RmsProp(rms) => {
                    let ms = (moments[0].affine(rms.decay, 0.0).unwrap()
                        + grad.sqr().unwrap().affine(1.0 - rms.decay, 0.0).unwrap())
                    .unwrap();
                    let u = (grad / ms.affine(1.0, rms.eps).unwrap().sqrt().unwrap())
                        .unwrap()
                        .affine(lr, 0.0)
                        .unwrap();
                    *moments = vec![ms];
                    u
                }
            };
            var.set(&(var.as_tensor() - update).unwrap()).unwrap();
        }
    }
}

/// Variables of several shapes, the same values in two copies.
fn twin_vars(seed: u64) -> (Vec<(String, Var)>, Vec<Var>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let shapes: [&[usize]; 4] = [&[3, 4], &[4], &[2, 3, 2], &[1]];
    let mut a = Vec::new();
    let mut b = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let t = Tensor::from_vec(data, *shape, &Device::Cpu).unwrap();
        a.push((format!("v{i}"), Var::from_tensor(&t).unwrap()));
        b.push(Var::from_tensor(&t).unwrap());
    }
    (a, b)
}

/// Gradients `Σ θ ⊙ g` for random `g`, for the variables not skipped.
fn random_grads(vars: &[Var], skip: Option<usize>, rng: &mut StdRng) -> GradStore {
    let mut loss = Tensor::zeros((), DType::F32, &Device::Cpu).unwrap();
    for (i, var) in vars.iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        let n = var.elem_count();
        let g: Vec<f32> = (0..n).map(|_| rng.random_range(-3.0..3.0)).collect();
        let g = Tensor::from_vec(g, var.shape(), &Device::Cpu).unwrap();
        let term = (var.as_tensor() * g).unwrap().sum_all().unwrap();
        loss = (loss + term).unwrap();
    }
    loss.backward().unwrap()
}

#[test]
fn flat_update_equals_the_per_variable_update_bit_for_bit() {
    for algorithm in [
        Algorithm::Adam(AdamConfig::kingma_ba()),
        Algorithm::RmsProp(RmsPropConfig::with_eps(0.01)),
    ] {
        let (named, twins) = twin_vars(3);
        let flat_vars: Vec<Var> = named.iter().map(|(_, v)| v.clone()).collect();
        let mut flat = Optimizer::from_named_vars(named, constant(0.01, algorithm)).unwrap();
        let mut reference = PerVariable::new(&twins, algorithm, 0.01);
        let (mut rng_a, mut rng_b) = (StdRng::seed_from_u64(9), StdRng::seed_from_u64(9));
        for step in 0..6 {
            // Step 3 leaves v2 without a gradient.
            let skip = (step == 3).then_some(2);
            flat.step(&random_grads(&flat_vars, skip, &mut rng_a))
                .unwrap();
            reference.step(&random_grads(&twins, skip, &mut rng_b));
            for (a, b) in flat_vars.iter().zip(&twins) {
                let a = a
                    .as_tensor()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap();
                let b = b
                    .as_tensor()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap();
                assert_eq!(a, b, "{algorithm:?}, step {step}");
            }
        }
        // The moments, per variable, match too.
        let state = flat.state().unwrap();
        for (i, moments) in reference.moments.iter().enumerate() {
            let keys = match algorithm {
                Algorithm::Adam(_) => {
                    vec![adam_m_key(&format!("v{i}")), adam_v_key(&format!("v{i}"))]
                }
                Algorithm::RmsProp(_) => vec![rmsprop_key(&format!("v{i}"))],
            };
            for (key, want) in keys.iter().zip(moments) {
                let got = &state[key];
                assert_eq!(got.dims(), want.dims(), "{key}");
                let got = got.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                let want = want.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                assert_eq!(got, want, "{key}");
            }
        }
    }
}

/// On the CPU the step runs on the host (`host_update`); the tensor ops
/// (what a GPU runs) give the same weights and moments to the bit, over
/// steps where a variable has no gradient too.
#[test]
fn the_host_update_equals_the_tensor_update_bit_for_bit() {
    for algorithm in [
        Algorithm::Adam(AdamConfig::with_eps(1e-3)),
        Algorithm::RmsProp(RmsPropConfig::with_eps(0.01)),
    ] {
        let (named, twins) = twin_vars(8);
        let host_vars: Vec<Var> = named.iter().map(|(_, v)| v.clone()).collect();
        let twin_named: Vec<(String, Var)> = named
            .iter()
            .zip(&twins)
            .map(|((name, _), v)| (name.clone(), v.clone()))
            .collect();
        let mut host = Optimizer::from_named_vars(named, constant(0.02, algorithm)).unwrap();
        let mut tensors =
            Optimizer::from_named_vars(twin_named, constant(0.02, algorithm)).unwrap();
        let (mut rng_a, mut rng_b) = (StdRng::seed_from_u64(4), StdRng::seed_from_u64(4));
        for step in 0..5 {
            let skip = (step == 2).then_some(1);
            host.step(&random_grads(&host_vars, skip, &mut rng_a))
                .unwrap();
            let grads = random_grads(&twins, skip, &mut rng_b);
            let (lr, t) = (tensors.learning_rate(), tensors.step_count + 1);
            tensors.step_tensors(&grads, lr, t).unwrap();
            tensors.step_count = t;
            for (a, b) in host_vars.iter().zip(&twins) {
                assert_eq!(values_of(a), values_of(b), "{algorithm:?}, step {step}");
            }
            let (sa, sb) = (host.state().unwrap(), tensors.state().unwrap());
            for (key, a) in &sa {
                let a = a.flatten_all().unwrap().to_dtype(DType::F64).unwrap();
                let b = sb[key].flatten_all().unwrap().to_dtype(DType::F64).unwrap();
                assert_eq!(
                    a.to_vec1::<f64>().unwrap(),
                    b.to_vec1::<f64>().unwrap(),
                    "{key}"
                );
            }
        }
    }
}

fn values_of(var: &Var) -> Vec<f32> {
    var.as_tensor()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
}

#[test]
fn flat_clip_norm_agrees_with_the_per_variable_norm() {
    let (named, _) = twin_vars(4);
    let vars: Vec<Var> = named.iter().map(|(_, v)| v.clone()).collect();
    let opt = Optimizer::from_named_vars(named, OptimizerConfig::constant_adam(6e-4)).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let mut a = random_grads(&vars, None, &mut rng);
    let mut rng = StdRng::seed_from_u64(5);
    let mut b = random_grads(&vars, None, &mut rng);
    let flat = opt.clip_grad_norm(&mut a, 1.0).unwrap();
    let per_var = clip_grad_norm(&mut b, vars.iter(), 1.0).unwrap();
    // One sum over all squares against a sum of per-variable sums: the
    // same value up to float rounding.
    assert!(
        (flat - per_var).abs() <= 1e-6 * per_var,
        "{flat} vs {per_var}"
    );
    assert!(flat > 1.0, "the test must clip");
    for var in &vars {
        let ga = a.get(var.as_tensor()).unwrap().flatten_all().unwrap();
        let gb = b.get(var.as_tensor()).unwrap().flatten_all().unwrap();
        let d = (ga - gb).unwrap().abs().unwrap().max(0).unwrap();
        assert!(d.to_scalar::<f32>().unwrap() <= 1e-6);
    }
}

#[test]
fn variables_on_one_device_and_dtype_only() {
    let a = var(&[1.0]);
    let b = Var::from_tensor(&Tensor::new(&[1f64], &Device::Cpu).unwrap()).unwrap();
    let e = Optimizer::from_named_vars(
        [("a".to_string(), a), ("b".to_string(), b)],
        OptimizerConfig::constant_adam(6e-4),
    )
    .unwrap_err();
    assert!(
        matches!(e, OptimizerError::MixedVariables { ref name, .. } if name == "b"),
        "{e}"
    );
}

#[test]
fn variables_without_gradient_are_untouched() {
    let used = var(&[1.0]);
    let unused = var(&[5.0]);
    let mut adam = Optimizer::from_named_vars(
        [
            ("a".to_string(), used.clone()),
            ("b".to_string(), unused.clone()),
        ],
        constant(0.1, Algorithm::Adam(AdamConfig::kingma_ba())),
    )
    .unwrap();
    adam.step(&grads_of(&used, &[1.0])).unwrap();
    assert_eq!(values(&unused), [5.0]);
    assert!(values(&used)[0] < 1.0);
}

#[test]
fn clipping_scales_to_max_norm_and_returns_the_original() {
    let a = var(&[0.0, 0.0]);
    let b = var(&[0.0]);
    let loss = ((a.as_tensor() * Tensor::new(&[3.0f32, 0.0], &Device::Cpu).unwrap())
        .unwrap()
        .sum_all()
        .unwrap()
        + (b.as_tensor() * Tensor::new(&[4.0f32], &Device::Cpu).unwrap())
            .unwrap()
            .sum_all()
            .unwrap())
    .unwrap();
    let mut grads = loss.backward().unwrap();
    let norm = clip_grad_norm(&mut grads, [&a, &b], 1.0).unwrap();
    assert!((norm - 5.0).abs() < 1e-6);
    let ga = grads.get(a.as_tensor()).unwrap().to_vec1::<f32>().unwrap();
    let gb = grads.get(b.as_tensor()).unwrap().to_vec1::<f32>().unwrap();
    assert!((ga[0] - 0.6).abs() < 1e-6 && ga[1] == 0.0 && (gb[0] - 0.8).abs() < 1e-6);
    // Already within the bound: nothing changes.
    let norm = clip_grad_norm(&mut grads, [&a, &b], 2.0).unwrap();
    assert!((norm - 1.0).abs() < 1e-6);
    assert_eq!(
        grads.get(a.as_tensor()).unwrap().to_vec1::<f32>().unwrap(),
        ga
    );
    assert!(matches!(
        clip_grad_norm(&mut grads, [&a], 0.0),
        Err(OptimizerError::InvalidMaxNorm { .. })
    ));
}

#[test]
fn linear_decay_reaches_zero_and_stays_there() {
    let schedule = LrSchedule::LinearDecay {
        initial: 1.0,
        decay_steps: 4,
        last: 0.0,
    };
    let lrs: Vec<f64> = (0..6).map(|s| schedule.lr_at(s)).collect();
    assert_eq!(lrs, [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]);
}

#[test]
fn linear_decay_stops_at_its_floor() {
    let schedule = LrSchedule::LinearDecay {
        initial: 1.0,
        decay_steps: 4,
        last: 0.2,
    };
    let lrs: Vec<f64> = (0..7).map(|s| schedule.lr_at(s)).collect();
    let want = [1.0, 0.8, 0.6, 0.4, 0.2, 0.2, 0.2];
    for (got, want) in lrs.iter().zip(want) {
        assert!((got - want).abs() < 1e-12, "{lrs:?}");
    }
}

fn two_var_map() -> VarMap {
    let varmap = VarMap::new();
    varmap
        .get(
            (2, 3),
            "layer.weight",
            Init::Randn {
                mean: 0.0,
                stdev: 1.0,
            },
            DType::F32,
            &Device::Cpu,
        )
        .unwrap();
    varmap
        .get(3, "layer.bias", Init::Const(0.1), DType::F32, &Device::Cpu)
        .unwrap();
    varmap
}

/// A fixed differentiable loss over the map's two variables.
fn loss_grads(varmap: &VarMap, seed: f32) -> GradStore {
    let data = varmap.data().lock().unwrap();
    let w = data["layer.weight"].as_tensor();
    let b = data["layer.bias"].as_tensor();
    let x = Tensor::new(&[[seed, -1.0]], &Device::Cpu).unwrap();
    let y = x.matmul(w).unwrap().broadcast_add(b).unwrap();
    y.sqr().unwrap().sum_all().unwrap().backward().unwrap()
}

fn snapshot(varmap: &VarMap) -> Vec<(String, Vec<f32>)> {
    let data = varmap.data().lock().unwrap();
    let mut all: Vec<_> = data
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v.as_tensor().flatten_all().unwrap().to_vec1().unwrap(),
            )
        })
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

#[test]
fn state_round_trips_through_safetensors_and_continues_identically() {
    for algorithm in [
        Algorithm::Adam(AdamConfig::kingma_ba()),
        Algorithm::RmsProp(RmsPropConfig::with_eps(0.01)),
    ] {
        let config = OptimizerConfig {
            algorithm,
            schedule: LrSchedule::LinearDecay {
                initial: 0.05,
                decay_steps: 100,
                last: 0.0,
            },
        };
        let original = two_var_map();
        let mut first = Optimizer::new(&original, config).unwrap();
        for s in 0..3 {
            first.step(&loss_grads(&original, s as f32)).unwrap();
        }

        let dir = tempfile::tempdir().unwrap();
        let weights = dir.path().join("weights.safetensors");
        let optimizer = dir.path().join("optimizer.safetensors");
        original.save(&weights).unwrap();
        candle_core::safetensors::save(&first.state().unwrap(), &optimizer).unwrap();

        let mut resumed_map = two_var_map();
        resumed_map.load(&weights).unwrap();
        let mut resumed = Optimizer::new(&resumed_map, config).unwrap();
        resumed
            .load_state(&candle_core::safetensors::load(&optimizer, &Device::Cpu).unwrap())
            .unwrap();
        assert_eq!(resumed.step_count(), 3);
        assert_eq!(resumed.learning_rate(), first.learning_rate());

        for s in 3..5 {
            first.step(&loss_grads(&original, s as f32)).unwrap();
            resumed.step(&loss_grads(&resumed_map, s as f32)).unwrap();
        }
        assert_eq!(snapshot(&original), snapshot(&resumed_map), "{algorithm:?}");

        // A fresh optimizer (zero moments) on the same weights diverges:
        // the restored moments mattered.
        let mut fresh_map = two_var_map();
        fresh_map.load(&weights).unwrap();
        let mut fresh = Optimizer::new(&fresh_map, config).unwrap();
        for s in 3..5 {
            fresh.step(&loss_grads(&fresh_map, s as f32)).unwrap();
        }
        assert_ne!(snapshot(&original), snapshot(&fresh_map), "{algorithm:?}");
    }
}

#[test]
fn load_state_rejects_missing_and_misshapen_entries() {
    let varmap = two_var_map();
    let config = OptimizerConfig::constant_adam(6e-4);
    let mut adam = Optimizer::new(&varmap, config).unwrap();
    adam.step(&loss_grads(&varmap, 1.0)).unwrap();
    let good = adam.state().unwrap();

    let mut missing = good.clone();
    missing.remove("adam/v/layer.bias");
    let err = adam.load_state(&missing).unwrap_err();
    assert!(
        matches!(&err, OptimizerError::MissingState { key } if key == "adam/v/layer.bias"),
        "{err}"
    );

    let mut misshapen = good.clone();
    misshapen.insert(
        "adam/m/layer.weight".to_string(),
        Tensor::zeros(6, DType::F32, &Device::Cpu).unwrap(),
    );
    let err = adam.load_state(&misshapen).unwrap_err();
    assert!(
        matches!(err, OptimizerError::StateShapeMismatch { .. }),
        "{err}"
    );

    let mut negative = good.clone();
    negative.insert(
        STEP_KEY.to_string(),
        Tensor::new(&[-1i64], &Device::Cpu).unwrap(),
    );
    assert!(matches!(
        adam.load_state(&negative),
        Err(OptimizerError::InvalidStepCount { .. })
    ));
    assert_eq!(
        adam.step_count(),
        1,
        "a failed load leaves the optimizer as it was"
    );

    let rms = Optimizer::new(
        &varmap,
        OptimizerConfig {
            algorithm: Algorithm::RmsProp(RmsPropConfig::with_eps(0.01)),
            ..config
        },
    );
    let err = rms.unwrap().load_state(&good).unwrap_err();
    assert!(
        matches!(err, OptimizerError::MissingState { .. }),
        "Adam state into RMSProp: {err}"
    );
}

#[test]
fn impala_loss_and_adam_learn_a_two_armed_bandit() {
    // A softmax policy over two arms (logits `[A]`, no observation) and a
    // scalar baseline. Arm 1 pays 1, arm 0 pays 0; episodes last one step
    // and auto-reset, so every step after the first is `terminated`.
    const T: usize = 5;
    const B: usize = 16;
    let device = Device::Cpu;
    let varmap = VarMap::new();
    let logits = varmap
        .get(2, "policy.logits", Init::Const(0.0), DType::F32, &device)
        .unwrap();
    let baseline = varmap
        .get(1, "value.bias", Init::Const(0.0), DType::F32, &device)
        .unwrap();
    let mut optimizer = Optimizer::new(
        &varmap,
        constant(0.05, Algorithm::Adam(AdamConfig::kingma_ba())),
    )
    .unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let config = ImpalaLossConfig::impala_paper();
    let prob_of_arm_1 = |logits: &Tensor| {
        candle_nn::ops::softmax(logits, 0)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()[1]
    };
    assert!((prob_of_arm_1(&logits) - 0.5).abs() < 1e-6);
    for _ in 0..60 {
        // Act with the current policy (behaviour = target, on-policy).
        let p1 = prob_of_arm_1(&logits);
        let actions: Vec<u32> = (0..(T + 1) * B)
            .map(|_| u32::from(rng.random::<f32>() < p1))
            .collect();
        // reward_k is for the action at step k − 1; step 0's reward is unused.
        let mut rewards = vec![0f32; (T + 1) * B];
        for k in 1..=T {
            for b in 0..B {
                rewards[k * B + b] = actions[(k - 1) * B + b] as f32;
            }
        }
        let mut terminated = vec![1u8; (T + 1) * B];
        terminated[..B].fill(0);
        let target_logits = logits.broadcast_as((T + 1, B, 2)).unwrap();
        let values = baseline.broadcast_as((T + 1, B)).unwrap();
        let loss = impala_loss(
            &ImpalaLossInputs {
                distribution: crate::model::ActionDistribution::Categorical { num_actions: 2 },
                target_params: &target_logits,
                values: &values,
                behaviour_params: &target_logits.detach(),
                actions: &Tensor::from_vec(actions, (T + 1, B), &device).unwrap(),
                rewards: &Tensor::from_vec(rewards, (T + 1, B), &device).unwrap(),
                terminated: &Tensor::from_vec(terminated, (T + 1, B), &device).unwrap(),
                truncated: &Tensor::zeros((T + 1, B), DType::U8, &device).unwrap(),
            },
            &config,
        )
        .unwrap();
        let mut grads = loss.total.backward().unwrap();
        optimizer.clip_grad_norm(&mut grads, 40.0).unwrap();
        optimizer.step(&grads).unwrap();
    }
    let p1 = prob_of_arm_1(&logits);
    assert!(p1 > 0.9, "P(better arm) = {p1}");
    let baseline = baseline.to_vec1::<f32>().unwrap()[0];
    assert!(
        baseline > 0.5,
        "the baseline tracks the mean reward: {baseline}"
    );
}
