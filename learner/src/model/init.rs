//! Seeded weight initialisation. candle cannot seed its CPU RNG, so the
//! weights are redrawn here from a `StdRng`, visiting variables in name order
//! so the same seed always gives the same network.
//!
//! Rules: weights uniform in `±gain/sqrt(fan_in)` (fan_in = product of all
//! dims but the first), biases zero; the policy head uses gain 0.01 so the
//! initial policy is near uniform (a Gaussian's mean near 0), which helps
//! early exploration; a Gaussian's `log_std` starts at
//! [`LOG_STD_INIT`] everywhere.
use candle_core::{Result, Tensor};
use candle_nn::VarMap;
use rand::{Rng, SeedableRng};

use super::distribution::LOG_STD_INIT;

pub fn reinitialise(varmap: &VarMap, seed: u64) -> Result<()> {
    let data = varmap
        .data()
        .lock()
        .map_err(|_| candle_core::Error::Msg("variable map lock poisoned".into()))?;
    let mut names: Vec<&String> = data.keys().collect();
    names.sort();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for name in names {
        let var = &data[name];
        let dims = var.dims().to_vec();
        let n: usize = dims.iter().product();
        let is_bias = name.ends_with("bias") || name.contains(".b_");
        let values: Vec<f32> = if is_bias {
            vec![0.0; n]
        } else if name == "log_std" {
            vec![LOG_STD_INIT; n]
        } else {
            let fan_in: usize = dims.iter().skip(1).product::<usize>().max(1);
            let gain = if name.starts_with("policy.") {
                0.01
            } else {
                1.0
            };
            let bound = gain / (fan_in as f32).sqrt();
            (0..n).map(|_| rng.random_range(-bound..=bound)).collect()
        };
        var.set(&Tensor::from_vec(values, dims, var.device())?)?;
    }
    Ok(())
}
