//! [`Optimizer`]: Adam or RMSProp over one flat buffer of moments (see the
//! module docs of `learn::optimizer` for the rules and the op counts).
use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::VarMap;

use crate::learn::optimizer::clip::scale_to_norm;
use crate::learn::optimizer::config::{AdamConfig, Algorithm, OptimizerConfig, RmsPropConfig};
use crate::learn::optimizer::error::OptimizerError;
use crate::learn::optimizer::host_update;
use crate::learn::optimizer::param::Param;

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
pub(super) enum Moments {
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

/// Adam or RMSProp over a fixed set of named variables.
#[derive(Debug)]
pub struct Optimizer {
    /// Sorted by name, so iteration order (and any float summation) is
    /// stable; ranges in the flat buffers follow this order.
    pub(super) params: Vec<Param>,
    pub(super) moments: Moments,
    pub(super) config: OptimizerConfig,
    /// Steps taken; the next step uses `schedule.lr_at(step_count)` and
    /// bias-correction exponent `step_count + 1`.
    pub(super) step_count: u64,
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
        let host = if host_update::applies(&self.params, &self.moment_tensors()) {
            host_update::squared_norm(&self.params, grads)
        } else {
            None
        };
        let norm = match host {
            Some(squares) => squares.sqrt(),
            None => {
                let Some((flat, _)) = self.flat_gradients(grads)? else {
                    return Ok(0.0);
                };
                flat.to_dtype(DType::F32)?
                    .sqr()?
                    .sum_all()?
                    .sqrt()?
                    .to_scalar::<f32>()?
            }
        };
        scale_to_norm(grads, self.vars(), norm, max_norm)?;
        Ok(norm)
    }

    /// The flat moment tensors, in the order the rule keeps them.
    fn moment_tensors(&self) -> Vec<&Tensor> {
        match &self.moments {
            Moments::Adam { m, v, .. } => vec![m, v],
            Moments::RmsProp { mean_square, .. } => vec![mean_square],
        }
    }

    /// [`Optimizer::step`] on the host (`host_update`), when every
    /// variable and moment is f32 on the CPU: `true` when it ran.
    fn host_step(&mut self, grads: &GradStore, lr: f64, t: u64) -> Result<bool, OptimizerError> {
        if !host_update::applies(&self.params, &self.moment_tensors()) {
            return Ok(false);
        }
        let rule = match &self.moments {
            Moments::Adam { config, .. } => host_update::Rule::adam(config, t, lr),
            Moments::RmsProp { config, .. } => host_update::Rule::rmsprop(config, lr),
        };
        let Some(new) = host_update::step(&self.params, grads, &self.moment_tensors(), rule)?
        else {
            return Ok(false);
        };
        let mut new = new.into_iter();
        let mut next = || {
            new.next().ok_or_else(|| {
                OptimizerError::from(candle_core::Error::Msg(
                    "optimizer: moment count mismatch".into(),
                ))
            })
        };
        self.moments = match &self.moments {
            Moments::Adam { config, .. } => Moments::Adam {
                config: *config,
                m: next()?,
                v: next()?,
            },
            Moments::RmsProp { config, .. } => Moments::RmsProp {
                config: *config,
                mean_square: next()?,
            },
        };
        Ok(true)
    }

    /// Applies one update from `grads` (from `loss.backward()`). Variables
    /// without a gradient are left alone, their moments unchanged.
    pub fn step(&mut self, grads: &GradStore) -> Result<AppliedStep, OptimizerError> {
        let lr = self.config.schedule.lr_at(self.step_count);
        let t = self.step_count + 1;
        if !self.host_step(grads, lr, t)? {
            self.step_tensors(grads, lr, t)?;
        }
        self.step_count = t;
        Ok(AppliedStep {
            learning_rate: lr,
            step_count: t,
        })
    }

    /// The update as tensor ops over the flat buffers (any device).
    pub(super) fn step_tensors(
        &mut self,
        grads: &GradStore,
        lr: f64,
        t: u64,
    ) -> Result<(), OptimizerError> {
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
