//! Adam and RMSProp over a candle [`VarMap`], with global-norm gradient
//! clipping, a learning-rate schedule, and state that checkpoints.
//!
//! Why not `candle_nn::AdamW`: its moments are private, so a resumed run would
//! restart them from zero. Here the state (step count, per-variable moments) is
//! exported and imported as a `HashMap<String, Tensor>` keyed by variable name,
//! ready for `candle_core::safetensors::save` / `load`:
//!
//! | key                              | shape    | meaning                       |
//! |----------------------------------|----------|-------------------------------|
//! | `optimizer/step`                 | `[1]` i64| steps taken so far            |
//! | `adam/m/{var}`, `adam/v/{var}`   | as `var` | Adam first and second moments |
//! | `rmsprop/mean_square/{var}`      | as `var` | RMSProp running mean of g²    |
//!
//! Updates, with `t` the 1-based step and `lr_t` from the [`LrSchedule`]:
//!
//! ```text
//! Adam (Kingma & Ba 2015):  m ← β1 m + (1−β1) g;  v ← β2 v + (1−β2) g²
//!                           θ ← θ − lr_t · (m / (1−β1^t)) / (√(v / (1−β2^t)) + ε)
//! RMSProp (TF form, as IMPALA used it):
//!                           ms ← ρ ms + (1−ρ) g²;  θ ← θ − lr_t · g / √(ms + ε)
//! ```
//!
//! # One flat buffer
//!
//! The moments of all variables live in one flat tensor per kind (`m`, `v`,
//! or the mean square), each variable owning a range of it. A step gathers
//! the gradients into one flat buffer (one concatenation), runs the update
//! rule once over all of it, and subtracts each variable's range from the
//! variable. With `P` variables that is `3P + 13` tensor ops for Adam
//! instead of `15P`, each a kernel launch on a GPU: 37 instead of 120 for
//! the CartPole MLP (`P = 8`). Every element goes through the same
//! operations as it would variable by variable, so the results are the
//! same (tested against that form). The exported state is still keyed per
//! variable (views of the flat moments), so checkpoints are unchanged.
//!
//! Cost: `3P + 13` ops per Adam step (`3P + 9` for RMSProp), all on the
//! variables' device; [`Optimizer::step`] never synchronises with the host.
//! [`Optimizer::clip_grad_norm`] takes `P + 3` ops over the flat gradients
//! (`3P + 2` per variable; plus `P` when it clips) and reads one scalar
//! back (the norm). The concatenations count `P` each: candle copies each
//! part with its own kernel.
//!
//! The variable set is fixed when the optimizer is built: variables created in
//! the `VarMap` later are not trained.
use std::collections::HashMap;

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Shape, Tensor, Var};
use candle_nn::VarMap;

/// Errors from building, stepping or restoring an [`Optimizer`].
#[derive(Debug, thiserror::Error)]
pub enum OptimizerError {
    /// A tensor operation failed.
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// The `VarMap`'s lock was poisoned by a panic elsewhere.
    #[error("the VarMap lock is poisoned")]
    PoisonedVarMap,
    /// A state entry this optimizer needs is absent.
    #[error("optimizer state has no entry {key:?}")]
    MissingState {
        /// The absent key.
        key: String,
    },
    /// A state entry's shape does not match its variable.
    #[error("optimizer state {key:?} has shape {got:?}, its variable needs {expected:?}")]
    StateShapeMismatch {
        /// The offending key.
        key: String,
        /// The variable's shape.
        expected: Shape,
        /// The stored shape.
        got: Shape,
    },
    /// The stored step count is not a non-negative integer.
    #[error("optimizer state {key:?} is not a valid step count")]
    InvalidStepCount {
        /// The offending key.
        key: String,
    },
    /// `clip_grad_norm` needs a positive, finite maximum.
    #[error("max_norm must be positive and finite, got {max_norm}")]
    InvalidMaxNorm {
        /// The rejected value.
        max_norm: f32,
    },
    /// The flat buffers need every variable on one device with one dtype.
    #[error("variable {name:?} is {got}, the first one {expected}: all variables must share a device and dtype")]
    MixedVariables {
        /// The variable that differs.
        name: String,
        /// Device and dtype of the first variable.
        expected: String,
        /// Device and dtype of this one.
        got: String,
    },
}

/// Key of the step count in the exported state.
pub const STEP_KEY: &str = "optimizer/step";

/// Learning rate as a function of the step count.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum LrSchedule {
    /// The same rate every step.
    Constant {
        /// Learning rate.
        lr: f64,
    },
    /// `lr_t = last + (initial − last) · max(0, 1 − t / decay_steps)` for the
    /// 0-based step `t`: `initial` at the first step, `last` from step
    /// `decay_steps` on. A floor above 0 keeps a long run learning (a run
    /// decayed to 0 stops learning for good); it still damps the late,
    /// large updates that knock a solved policy back down.
    LinearDecay {
        /// Learning rate at step 0.
        initial: f64,
        /// Steps over which the rate falls to `last`.
        decay_steps: u64,
        /// Learning rate from step `decay_steps` on (0: stop learning).
        last: f64,
    },
}

impl LrSchedule {
    /// The learning rate for the 0-based step `step`.
    pub fn lr_at(&self, step: u64) -> f64 {
        match *self {
            Self::Constant { lr } => lr,
            Self::LinearDecay {
                initial,
                decay_steps,
                last,
            } => {
                if decay_steps == 0 {
                    return last;
                }
                let remaining = 1.0 - step as f64 / decay_steps as f64;
                last + (initial - last) * remaining.max(0.0)
            }
        }
    }
}

/// Adam's hyperparameters.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct AdamConfig {
    /// β1, first-moment decay.
    pub beta1: f64,
    /// β2, second-moment decay.
    pub beta2: f64,
    /// ε, added to `√v̂` (`--optimizer-epsilon`).
    pub eps: f64,
}

impl AdamConfig {
    /// Kingma and Ba's β1 0.9 and β2 0.999 with this ε (the learner's ε
    /// default is in `crate::app::settings`).
    pub fn with_eps(eps: f64) -> Self {
        Self {
            beta1: 0.9,
            beta2: 0.999,
            eps,
        }
    }

    /// Kingma and Ba's values, ε 1e-8 included: a fixed reference for tests.
    pub fn kingma_ba() -> Self {
        Self::with_eps(1e-8)
    }
}

/// RMSProp's hyperparameters (TensorFlow's form: ε inside the square root).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RmsPropConfig {
    /// ρ, decay of the running mean of g².
    pub decay: f64,
    /// ε, added to the mean square (`--optimizer-epsilon`).
    pub eps: f64,
}

impl RmsPropConfig {
    /// IMPALA's decay 0.99 with this ε (the learner's ε default is in
    /// `crate::app::settings`).
    pub fn with_eps(eps: f64) -> Self {
        Self { decay: 0.99, eps }
    }
}

/// Which update rule to apply.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum Algorithm {
    /// Adam with bias correction.
    Adam(AdamConfig),
    /// RMSProp without momentum.
    RmsProp(RmsPropConfig),
}

impl Algorithm {
    /// The rule's ε (Adam: added to `√v̂`; RMSProp: to the mean square).
    pub fn epsilon(&self) -> f64 {
        match *self {
            Self::Adam(a) => a.eps,
            Self::RmsProp(r) => r.eps,
        }
    }
}

/// Everything an [`Optimizer`] needs besides the variables.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct OptimizerConfig {
    /// The update rule.
    pub algorithm: Algorithm,
    /// The learning rate per step.
    pub schedule: LrSchedule,
}

impl OptimizerConfig {
    /// Kingma and Ba's Adam at a constant `lr`: a fixed reference for tests
    /// and benches (the learner's defaults are in `crate::app::settings`).
    pub fn constant_adam(lr: f64) -> Self {
        Self {
            algorithm: Algorithm::Adam(AdamConfig::kingma_ba()),
            schedule: LrSchedule::Constant { lr },
        }
    }
}

/// What one [`Optimizer::step`] did, for logging.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AppliedStep {
    /// The learning rate used (`train/learning_rate`).
    pub learning_rate: f64,
    /// Steps taken including this one.
    pub step_count: u64,
}

/// The optimizer's memory, one flat tensor per kind over all variables
/// (variable `i` owns `offset..offset + len`), with the hyperparameters of
/// its rule (so the rule and its memory can never disagree).
#[derive(Debug)]
enum Moments {
    Adam {
        config: AdamConfig,
        m: Tensor,
        v: Tensor,
    },
    RmsProp {
        config: RmsPropConfig,
        mean_square: Tensor,
    },
}

/// One trained variable: its name in the `VarMap`, the variable, and its
/// range in the flat buffers.
#[derive(Debug)]
struct Param {
    name: String,
    var: Var,
    offset: usize,
    len: usize,
}

/// Adam or RMSProp over a fixed set of named variables.
#[derive(Debug)]
pub struct Optimizer {
    /// Sorted by name, so iteration order (and any float summation) is
    /// stable; ranges in the flat buffers follow this order.
    params: Vec<Param>,
    moments: Moments,
    config: OptimizerConfig,
    /// Steps taken; the next step uses `schedule.lr_at(step_count)` and
    /// bias-correction exponent `step_count + 1`.
    step_count: u64,
}

impl Optimizer {
    /// An optimizer over every variable currently in `varmap`, moments at zero.
    pub fn new(varmap: &VarMap, config: OptimizerConfig) -> Result<Self, OptimizerError> {
        let vars: Vec<(String, Var)> = varmap
            .data()
            .lock()
            .map_err(|_| OptimizerError::PoisonedVarMap)?
            .iter()
            .map(|(name, var)| (name.clone(), var.clone()))
            .collect();
        Self::from_named_vars(vars, config)
    }

    /// An optimizer over the given named variables, moments at zero. They
    /// must share one device and dtype (the flat buffers').
    pub fn from_named_vars(
        vars: impl IntoIterator<Item = (String, Var)>,
        config: OptimizerConfig,
    ) -> Result<Self, OptimizerError> {
        let mut vars: Vec<(String, Var)> = vars.into_iter().collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        let (device, dtype) = match vars.first() {
            Some((_, var)) => (var.device().clone(), var.dtype()),
            None => (Device::Cpu, DType::F32),
        };
        let describe = |d: &Device, t: DType| format!("{:?} {t:?}", d.location());
        let mut params = Vec::with_capacity(vars.len());
        let mut offset = 0;
        for (name, var) in vars {
            if !var.device().same_device(&device) || var.dtype() != dtype {
                return Err(OptimizerError::MixedVariables {
                    expected: describe(&device, dtype),
                    got: describe(var.device(), var.dtype()),
                    name,
                });
            }
            let len = var.elem_count();
            params.push(Param {
                name,
                var,
                offset,
                len,
            });
            offset += len;
        }
        let zeros = Tensor::zeros(offset, dtype, &device)?;
        let moments = match config.algorithm {
            Algorithm::Adam(config) => Moments::Adam {
                config,
                m: zeros.clone(),
                v: zeros,
            },
            Algorithm::RmsProp(config) => Moments::RmsProp {
                config,
                mean_square: zeros,
            },
        };
        Ok(Self {
            params,
            moments,
            config,
            step_count: 0,
        })
    }

    /// Steps taken so far.
    pub fn step_count(&self) -> u64 {
        self.step_count
    }

    /// The learning rate the next step will use.
    pub fn learning_rate(&self) -> f64 {
        self.config.schedule.lr_at(self.step_count)
    }

    /// The trained variables, sorted by name.
    pub fn vars(&self) -> impl Iterator<Item = &Var> {
        self.params.iter().map(|p| &p.var)
    }

    /// The gradients of every variable, flat and in the buffers' order,
    /// zeros for a variable without one; `None` when no variable has one.
    /// Returns which variables had none.
    fn flat_gradients(
        &self,
        grads: &GradStore,
    ) -> Result<Option<(Tensor, Vec<bool>)>, OptimizerError> {
        let mut parts = Vec::with_capacity(self.params.len());
        let mut missing = Vec::with_capacity(self.params.len());
        for param in &self.params {
            match grads.get(param.var.as_tensor()) {
                // A leaf's gradient can still carry its backward graph
                // (candle 0.11 detaches only the gradients of interior
                // nodes; the conv kernel's comes out of a conv over the
                // layer's input). Folded into the moments undetached, every
                // step's graph, activations included, stayed reachable from
                // `m` and `v`: ~55 MB per step with the conv torso until the
                // GPU ran out of memory.
                Some(grad) => {
                    parts.push(grad.detach().to_dtype(param.var.dtype())?.flatten_all()?);
                    missing.push(false);
                }
                None => {
                    parts.push(param.var.as_tensor().zeros_like()?.flatten_all()?);
                    missing.push(true);
                }
            }
        }
        if missing.iter().all(|&m| m) {
            return Ok(None);
        }
        Ok(Some((Tensor::cat(&parts, 0)?, missing)))
    }

    /// Scales the gradients of this optimizer's variables to a global norm
    /// of at most `max_norm`; returns the norm before clipping, as
    /// [`clip_grad_norm`] does, with the sum of squares taken over the flat
    /// gradients at once (`P + 3` ops rather than `3P + 2`).
    pub fn clip_grad_norm(
        &self,
        grads: &mut GradStore,
        max_norm: f32,
    ) -> Result<f32, OptimizerError> {
        if !(max_norm.is_finite() && max_norm > 0.0) {
            return Err(OptimizerError::InvalidMaxNorm { max_norm });
        }
        let Some((flat, _)) = self.flat_gradients(grads)? else {
            return Ok(0.0);
        };
        let norm = flat
            .to_dtype(DType::F32)?
            .sqr()?
            .sum_all()?
            .sqrt()?
            .to_scalar::<f32>()?;
        scale_to_norm(grads, self.vars(), norm, max_norm)?;
        Ok(norm)
    }

    /// Applies one update from `grads` (from `loss.backward()`). Variables
    /// without a gradient are left alone, their moments unchanged.
    pub fn step(&mut self, grads: &GradStore) -> Result<AppliedStep, OptimizerError> {
        let lr = self.config.schedule.lr_at(self.step_count);
        let t = self.step_count + 1;
        if let Some((grad, missing)) = self.flat_gradients(grads)? {
            let grad = &grad;
            // Elementwise, in the same order of operations as the update
            // written per variable (see the tests), over all variables at once.
            let (update, moments) = match &self.moments {
                Moments::Adam { config: adam, m, v } => {
                    let m = (m.affine(adam.beta1, 0.0)? + grad.affine(1.0 - adam.beta1, 0.0)?)?;
                    let v = (v.affine(adam.beta2, 0.0)?
                        + grad.sqr()?.affine(1.0 - adam.beta2, 0.0)?)?;
                    let exponent = i32::try_from(t).unwrap_or(i32::MAX);
                    let m_hat = m.affine(1.0 / (1.0 - adam.beta1.powi(exponent)), 0.0)?;
                    let v_hat = v.affine(1.0 / (1.0 - adam.beta2.powi(exponent)), 0.0)?;
                    let update = (m_hat / v_hat.sqrt()?.affine(1.0, adam.eps)?)?.affine(lr, 0.0)?;
                    (update, vec![m, v])
                }
                Moments::RmsProp {
                    config: rms,
                    mean_square,
                } => {
                    let mean_square = (mean_square.affine(rms.decay, 0.0)?
                        + grad.sqr()?.affine(1.0 - rms.decay, 0.0)?)?;
                    let update =
                        (grad / mean_square.affine(1.0, rms.eps)?.sqrt()?)?.affine(lr, 0.0)?;
                    (update, vec![mean_square])
                }
            };
            let any_missing = missing.iter().any(|&m| m);
            let mut moments = moments.into_iter();
            let mut next = |old: &Tensor| -> Result<Tensor, OptimizerError> {
                let new = moments.next().ok_or_else(|| {
                    candle_core::Error::Msg("optimizer: moment count mismatch".into())
                })?;
                if any_missing {
                    keep_missing_ranges(&self.params, &missing, old, &new)
                } else {
                    Ok(new)
                }
            };
            let replaced = match &self.moments {
                Moments::Adam { config, m, v } => Moments::Adam {
                    config: *config,
                    m: next(m)?,
                    v: next(v)?,
                },
                Moments::RmsProp {
                    config,
                    mean_square,
                } => Moments::RmsProp {
                    config: *config,
                    mean_square: next(mean_square)?,
                },
            };
            for (param, &skip) in self.params.iter().zip(&missing) {
                if skip {
                    continue;
                }
                let step = update
                    .narrow(0, param.offset, param.len)?
                    .reshape(param.var.shape())?;
                param.var.set(&(param.var.as_tensor() - step)?)?;
            }
            self.moments = replaced;
        }
        self.step_count = t;
        Ok(AppliedStep {
            learning_rate: lr,
            step_count: t,
        })
    }

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

/// `new` with the ranges of the variables flagged `missing` taken from `old`
/// (their moments stay as they were). Only for steps where some variable
/// had no gradient: `P` extra ops.
fn keep_missing_ranges(
    params: &[Param],
    missing: &[bool],
    old: &Tensor,
    new: &Tensor,
) -> Result<Tensor, OptimizerError> {
    let parts = params
        .iter()
        .zip(missing)
        .map(|(p, &keep_old)| {
            let from = if keep_old { old } else { new };
            from.narrow(0, p.offset, p.len)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Tensor::cat(&parts, 0)?)
}

/// Scales the gradients of `vars` in place so that their global norm
/// `√(Σ_var ‖g‖²)` is at most `max_norm` (as TF's `clip_by_global_norm`:
/// `g ← g · max_norm / max(norm, max_norm)`); returns the norm before clipping,
/// for `train/grad_norm`. Variables without a gradient count as zero.
///
/// A non-finite norm leaves the gradients untouched and is returned as is, so
/// the caller can skip the step. Reads one scalar back from the device.
pub fn clip_grad_norm<'a>(
    grads: &mut GradStore,
    vars: impl IntoIterator<Item = &'a Var>,
    max_norm: f32,
) -> Result<f32, OptimizerError> {
    if !(max_norm.is_finite() && max_norm > 0.0) {
        return Err(OptimizerError::InvalidMaxNorm { max_norm });
    }
    let with_grads: Vec<(&Var, Tensor)> = vars
        .into_iter()
        .filter_map(|var| grads.get(var.as_tensor()).map(|g| (var, g.clone())))
        .collect();
    let mut squares = Vec::with_capacity(with_grads.len());
    for (_, grad) in &with_grads {
        squares.push(grad.to_dtype(DType::F32)?.sqr()?.sum_all()?);
    }
    if squares.is_empty() {
        return Ok(0.0);
    }
    let norm = Tensor::stack(&squares, 0)?
        .sum_all()?
        .sqrt()?
        .to_scalar::<f32>()?;
    scale_to_norm(
        grads,
        with_grads.iter().map(|(var, _)| *var),
        norm,
        max_norm,
    )?;
    Ok(norm)
}

/// The clipping half of [`clip_grad_norm`], given the norm: scales the
/// gradients of `vars` by `max_norm / norm` when `norm` exceeds `max_norm`;
/// leaves them alone when `norm` is not finite.
fn scale_to_norm<'a>(
    grads: &mut GradStore,
    vars: impl IntoIterator<Item = &'a Var>,
    norm: f32,
    max_norm: f32,
) -> Result<(), OptimizerError> {
    if !norm.is_finite() {
        // The trainer skips the step and reports it (rate-limited); one line here
        // per step would flood the log.
        tracing::debug!(norm, "non-finite gradient norm; gradients left unclipped");
        return Ok(());
    }
    if norm > max_norm {
        let scale = f64::from(max_norm / norm);
        for var in vars {
            if let Some(grad) = grads.get(var.as_tensor()) {
                let scaled = grad.affine(scale, 0.0)?;
                grads.insert(var.as_tensor(), scaled);
            }
        }
    }
    Ok(())
}

fn lookup<'a>(state: &'a HashMap<String, Tensor>, key: &str) -> Result<&'a Tensor, OptimizerError> {
    state.get(key).ok_or_else(|| OptimizerError::MissingState {
        key: key.to_string(),
    })
}

fn adam_m_key(name: &str) -> String {
    format!("adam/m/{name}")
}

fn adam_v_key(name: &str) -> String {
    format!("adam/v/{name}")
}

fn rmsprop_key(name: &str) -> String {
    format!("rmsprop/mean_square/{name}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::algo::{impala_loss, ImpalaLossConfig, ImpalaLossInputs};
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
}
