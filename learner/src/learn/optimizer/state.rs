//! The optimizer's state as named tensors (the table in the module docs of
//! `learn::optimizer`), for checkpoints: exported per variable as views of
//! the flat moments, and restored into them.
use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};

use crate::learn::optimizer::error::OptimizerError;
use crate::learn::optimizer::update::{Moments, Optimizer};

/// Key of the step count in the exported state.
pub const STEP_KEY: &str = "optimizer/step";

impl Optimizer {
    /// The optimizer's state, keyed as in the module docs: each variable's
    /// moments are a view of its range of the flat buffers. Tensors stay on
    /// their device; they share storage with nothing the optimizer mutates
    /// (a step makes new flat buffers).
    pub fn state(&self) -> Result<HashMap<String, Tensor>, OptimizerError> {
        let device = self
            .params
            .first()
            .map_or(Device::Cpu, |p| p.var.device().clone());
        let step = i64::try_from(self.step_count).unwrap_or(i64::MAX);
        let mut state = HashMap::with_capacity(1 + 2 * self.params.len());
        state.insert(STEP_KEY.to_string(), Tensor::new(&[step], &device)?);
        for param in &self.params {
            let range = |flat: &Tensor| -> Result<Tensor, OptimizerError> {
                Ok(flat
                    .narrow(0, param.offset, param.len)?
                    .reshape(param.var.shape())?)
            };
            match &self.moments {
                Moments::Adam { m, v, .. } => {
                    state.insert(adam_m_key(&param.name), range(m)?);
                    state.insert(adam_v_key(&param.name), range(v)?);
                }
                Moments::RmsProp { mean_square, .. } => {
                    state.insert(rmsprop_key(&param.name), range(mean_square)?);
                }
            }
        }
        Ok(state)
    }

    /// Restores a state from [`Optimizer::state`] (possibly through a
    /// safetensors file). Every variable's moments must be present with its
    /// shape; extra keys are ignored. Tensors are moved to each variable's
    /// device and dtype. On error the optimizer is unchanged.
    pub fn load_state(&mut self, state: &HashMap<String, Tensor>) -> Result<(), OptimizerError> {
        let step_tensor = lookup(state, STEP_KEY)?;
        let invalid_step = || OptimizerError::InvalidStepCount {
            key: STEP_KEY.to_string(),
        };
        let steps = step_tensor
            .flatten_all()?
            .to_dtype(DType::I64)?
            .to_vec1::<i64>()?;
        let step_count = match steps[..] {
            [step] => u64::try_from(step).map_err(|_| invalid_step())?,
            _ => return Err(invalid_step()),
        };
        // Per kind, each variable's moments flattened in the buffers' order.
        let flat = |key_of: fn(&str) -> String| -> Result<Tensor, OptimizerError> {
            let mut parts = Vec::with_capacity(self.params.len());
            for param in &self.params {
                let key = key_of(&param.name);
                let tensor = lookup(state, &key)?;
                if tensor.shape() != param.var.shape() {
                    return Err(OptimizerError::StateShapeMismatch {
                        key,
                        expected: param.var.shape().clone(),
                        got: tensor.shape().clone(),
                    });
                }
                parts.push(
                    tensor
                        .to_device(param.var.device())?
                        .to_dtype(param.var.dtype())?
                        .flatten_all()?,
                );
            }
            if parts.is_empty() {
                return Ok(Tensor::zeros(0, DType::F32, &Device::Cpu)?);
            }
            Ok(Tensor::cat(&parts, 0)?)
        };
        let restored = match self.moments {
            Moments::Adam { config, .. } => Moments::Adam {
                config,
                m: flat(adam_m_key)?,
                v: flat(adam_v_key)?,
            },
            Moments::RmsProp { config, .. } => Moments::RmsProp {
                config,
                mean_square: flat(rmsprop_key)?,
            },
        };
        self.moments = restored;
        self.step_count = step_count;
        Ok(())
    }
}

fn lookup<'a>(state: &'a HashMap<String, Tensor>, key: &str) -> Result<&'a Tensor, OptimizerError> {
    state.get(key).ok_or_else(|| OptimizerError::MissingState {
        key: key.to_string(),
    })
}

pub(super) fn adam_m_key(name: &str) -> String {
    format!("adam/m/{name}")
}

pub(super) fn adam_v_key(name: &str) -> String {
    format!("adam/v/{name}")
}

pub(super) fn rmsprop_key(name: &str) -> String {
    format!("rmsprop/mean_square/{name}")
}
