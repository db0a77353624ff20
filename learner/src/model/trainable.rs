//! [`TrainableModel`]: the model with the variables training updates in
//! place, seeded initialisation, and the frozen copies inference reads.
use candle_core::{DType, Device, Result, Tensor};
use candle_nn::{VarBuilder, VarMap};

use crate::model::actor_critic::ActorCritic;
use crate::model::config::ModelConfig;
use crate::model::init;

/// A model together with the variables that training updates in place.
pub struct TrainableModel {
    pub varmap: VarMap,
    pub model: ActorCritic,
}

impl TrainableModel {
    /// Creates a model with weights drawn from a seeded RNG (candle's CPU
    /// RNG cannot be seeded), so runs with the same seed start identically.
    pub fn new(config: &ModelConfig, device: &Device, seed: u64) -> Result<Self> {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
        let model = ActorCritic::new(config, vb)?;
        init::reinitialise(&varmap, seed)?;
        Ok(TrainableModel { varmap, model })
    }

    /// A frozen deep copy of the current weights, for inference to use while
    /// training keeps updating the variables.
    pub fn snapshot(&self) -> Result<ActorCritic> {
        self.snapshot_as(DType::F32)
    }

    /// [`TrainableModel::snapshot`] with the weights converted to `dtype`
    /// (one conversion per weight, on their device): the reduced-precision
    /// copy `--inference-dtype bf16` runs.
    pub fn snapshot_as(&self, dtype: DType) -> Result<ActorCritic> {
        self.build_as(self.named_tensors()?, dtype)
    }

    /// This model's network with the weights `tensors` (keyed as
    /// [`TrainableModel::named_tensors`] keys them) converted to `dtype`: a
    /// frozen network of other weights of the same shapes, such as
    /// the trainer's acting average (`--acting-average`).
    pub fn build_as(
        &self,
        tensors: std::collections::HashMap<String, Tensor>,
        dtype: DType,
    ) -> Result<ActorCritic> {
        let device = self.device();
        ActorCritic::new(
            self.model.config(),
            VarBuilder::from_tensors(tensors, dtype, &device),
        )
    }

    /// Deep copies of every variable, keyed by weight name.
    pub fn named_tensors(&self) -> Result<std::collections::HashMap<String, Tensor>> {
        self.variables()?
            .iter()
            .map(|(name, var)| Ok((name.clone(), var.as_tensor().copy()?)))
            .collect()
    }

    /// The variables by weight name, locked for as long as the guard lives.
    pub fn variables(
        &self,
    ) -> Result<std::sync::MutexGuard<'_, std::collections::HashMap<String, candle_core::Var>>>
    {
        self.varmap
            .data()
            .lock()
            .map_err(|_| candle_core::Error::Msg("variable map lock poisoned".into()))
    }

    fn device(&self) -> Device {
        self.model.policy.weight().device().clone()
    }
}
