//! [`ActingAverage`]: inference acts with an exponential moving average of
//! the trained weights (Polyak averaging), `--acting-average τ`.
//!
//! After every applied update each weight's average moves towards it,
//!
//! ```text
//! w̄ ← τ·w̄ + (1 − τ)·w
//! ```
//!
//! and the trainer publishes `w̄`, not `w`, for inference. The average starts
//! at the weights the trainer starts from (the initial network, or the
//! checkpoint's on `--resume`). Checkpoints and `--eval-every` hold and play
//! the trained weights, not the average.
//!
//! Why: a policy updated hundreds of times a second on batches of a few
//! hundred transitions moves from update to update by the noise of each
//! batch's gradient, not only by what it learns. Where a 100-episode mean
//! covers about a second of play (LunarLander at 64 envs ends some 90
//! episodes a second), that noise is what the mean shows: it swings by 80
//! between samples 2 s apart. The average acts with the centre of that
//! jitter, about the last `1 / (1 − τ)` updates. The lag it adds is what the
//! loss already corrects for: every step carries the parameters of the
//! policy that acted (`behaviour_params`), so V-trace's importance weights
//! and the clipped surrogate see the average as μ.
//!
//! Cost: per applied update, two scaled copies and a sum per weight tensor
//! on the trainer's device, and one copy of the average per publish (which
//! the latest weights needed as well); nothing when τ is 0.
use std::collections::HashMap;

use candle_core::{DType, Result, Tensor};

use crate::model::{ActorCritic, TrainableModel};

/// The moving average of a [`TrainableModel`]'s weights, keyed as its
/// variables are.
pub struct ActingAverage {
    /// τ in `(0, 1)`: the weight of the old average at each update.
    decay: f64,
    average: HashMap<String, Tensor>,
}

impl ActingAverage {
    /// An average that starts at `model`'s current weights.
    pub fn new(model: &TrainableModel, decay: f64) -> Result<Self> {
        let average = model
            .named_tensors()?
            .into_iter()
            .map(|(name, tensor)| (name, tensor.detach()))
            .collect();
        Ok(ActingAverage { decay, average })
    }

    /// `w̄ ← τ·w̄ + (1 − τ)·w` for every variable of `model`.
    pub fn update(&mut self, model: &TrainableModel) -> Result<()> {
        for (name, var) in model.variables()?.iter() {
            let Some(average) = self.average.get_mut(name) else {
                return Err(candle_core::Error::Msg(format!(
                    "acting average: no average for weight {name}"
                )));
            };
            // Detached: no autograd graph may link one average to the one
            // before (each would keep its predecessor alive: memory growing
            // with every update, and a recursive drop as deep as the run).
            let latest = var.as_tensor().detach();
            *average =
                (average.affine(self.decay, 0.0)? + latest.affine(1.0 - self.decay, 0.0)?)?;
        }
        Ok(())
    }

    /// The averaged network, its weights converted to `dtype`, for a publish.
    pub fn snapshot_as(&self, model: &TrainableModel, dtype: DType) -> Result<ActorCritic> {
        // A clone of the map shares the tensors' storage; the next update
        // replaces them rather than writing into them.
        model.build_as(self.average.clone(), dtype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelConfig;
    use candle_core::Device;
    use seed_shared::EnvSpec;

    fn set_all(model: &TrainableModel, value: f64) {
        for var in model.variables().unwrap().values() {
            var.set(
                &var.as_tensor()
                    .ones_like()
                    .unwrap()
                    .affine(value, 0.0)
                    .unwrap(),
            )
            .unwrap();
        }
    }

    /// Logits and value of `network` on one observation of ones.
    fn outputs(network: &ActorCritic) -> Vec<f32> {
        let obs = Tensor::ones((1, 4), DType::F32, &Device::Cpu).unwrap();
        let step = network.step(&obs, None).unwrap();
        let mut out = step
            .policy_params
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        out.extend(step.values.flatten_all().unwrap().to_vec1::<f32>().unwrap());
        out
    }

    #[test]
    fn a_snapshot_is_the_network_of_the_averaged_weights() {
        let cfg = ModelConfig::for_spec(&EnvSpec::cartpole());
        let model = TrainableModel::new(&cfg, &Device::Cpu, 1).unwrap();
        let reference = TrainableModel::new(&cfg, &Device::Cpu, 2).unwrap();
        set_all(&model, 0.0);
        let mut average = ActingAverage::new(&model, 0.75).unwrap();
        set_all(&model, 0.1);
        // 0.75 · 0 + 0.25 · 0.1, then 0.75 · 0.025 + 0.25 · 0.1.
        for expected in [0.025, 0.04375] {
            average.update(&model).unwrap();
            set_all(&reference, expected);
            let got = outputs(&average.snapshot_as(&model, DType::F32).unwrap());
            let want = outputs(&reference.snapshot().unwrap());
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-5, "{got:?} against {want:?}");
            }
        }
        // No average remembers how it was computed: a graph from each to the
        // one before would grow with every update.
        assert!(average.average.values().all(|t| !t.track_op()));
        // The trained weights are untouched: the latest network is not the average.
        let latest = outputs(&model.snapshot().unwrap());
        set_all(&reference, 0.1);
        assert_eq!(latest, outputs(&reference.snapshot().unwrap()));
    }
}
