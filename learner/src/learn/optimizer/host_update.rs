//! The optimizer's update on the CPU in one pass: for f32 variables in
//! host memory, Adam's or RMSProp's rule (`learn::optimizer`'s docs)
//! element by element over each variable's gradient, moments and weights,
//! instead of a dozen tensor ops over the whole flat buffer.
//!
//! Why: on a GPU each of those ops is one kernel launch over every weight,
//! which is why the moments are flat. On the CPU each op is a pass over
//! memory that allocates its output: for the MinAtar torso's 270k weights
//! the update and the gathering of the gradients into one buffer were
//! about a tenth of a training step. Here each gradient is read where
//! backward left it, and each element goes through the same f32
//! operations, in the same order and with the same constants, as the
//! tensor form (so the weights and moments are the same to the bit,
//! tested), with no buffer but the new moments.
//!
//! Cost: one read of every gradient, moment and weight, one write of each
//! moment and weight; no flat copy of the gradients.
use candle_core::backprop::GradStore;
use candle_core::{CpuStorage, DType, Storage, Tensor};

use crate::learn::optimizer::config::{AdamConfig, RmsPropConfig};
use crate::learn::optimizer::param::Param;

/// A rule's per-step constants, as candle's `affine` would cast them.
#[derive(Debug, Clone, Copy)]
pub(super) enum Rule {
    Adam {
        beta1: f32,
        one_minus_beta1: f32,
        beta2: f32,
        one_minus_beta2: f32,
        /// `1 / (1 − β1^t)`, `1 / (1 − β2^t)`.
        correct1: f32,
        correct2: f32,
        eps: f32,
        lr: f32,
    },
    RmsProp {
        decay: f32,
        one_minus_decay: f32,
        eps: f32,
        lr: f32,
    },
}

impl Rule {
    /// Adam's constants at 1-based step `t` with learning rate `lr`.
    pub(super) fn adam(c: &AdamConfig, t: u64, lr: f64) -> Self {
        let exponent = i32::try_from(t).unwrap_or(i32::MAX);
        Rule::Adam {
            beta1: c.beta1 as f32,
            one_minus_beta1: (1.0 - c.beta1) as f32,
            beta2: c.beta2 as f32,
            one_minus_beta2: (1.0 - c.beta2) as f32,
            correct1: (1.0 / (1.0 - c.beta1.powi(exponent))) as f32,
            correct2: (1.0 / (1.0 - c.beta2.powi(exponent))) as f32,
            eps: c.eps as f32,
            lr: lr as f32,
        }
    }

    /// RMSProp's constants with learning rate `lr`.
    pub(super) fn rmsprop(c: &RmsPropConfig, lr: f64) -> Self {
        Rule::RmsProp {
            decay: c.decay as f32,
            one_minus_decay: (1.0 - c.decay) as f32,
            eps: c.eps as f32,
            lr: lr as f32,
        }
    }
}

/// A contiguous f32 CPU tensor's values, or `None`.
fn host_values(t: &Tensor) -> Option<Vec<f32>> {
    let (storage, layout) = t.storage_and_layout();
    let Storage::Cpu(CpuStorage::F32(v)) = &*storage else {
        return None;
    };
    let (start, end) = layout.contiguous_offsets()?;
    Some(v[start..end].to_vec())
}

/// Runs `f` on a contiguous f32 CPU tensor's values in place, or `None`.
fn with_host_values<R>(t: &Tensor, f: impl FnOnce(&[f32]) -> R) -> Option<R> {
    let (storage, layout) = t.storage_and_layout();
    let Storage::Cpu(CpuStorage::F32(v)) = &*storage else {
        return None;
    };
    let (start, end) = layout.contiguous_offsets()?;
    Some(f(&v[start..end]))
}

/// Whether the host update applies: every variable and moment f32 on the CPU.
pub(super) fn applies(params: &[Param], moments: &[&Tensor]) -> bool {
    params
        .iter()
        .map(|p| p.var.as_tensor())
        .chain(moments.iter().copied())
        .all(|t| t.device().is_cpu() && t.dtype() == DType::F32)
}

/// The sum of the squares of every gradient in `grads` of `params`, read
/// in place, in f32 as the tensor form sums them; `None` when a gradient
/// is not a contiguous f32 CPU tensor.
pub(super) fn squared_norm(params: &[Param], grads: &GradStore) -> Option<f32> {
    let mut sum = 0f32;
    for param in params {
        if let Some(g) = grads.get(param.var.as_tensor()) {
            sum += with_host_values(g, |g| g.iter().map(|x| x * x).sum::<f32>())?;
        }
    }
    Some(sum)
}

/// One step of `rule` over `params`: new moments (`moments`, flat, in the
/// buffers' order) returned, weights written. A variable without a
/// gradient keeps its weights and moments. `None` (nothing changed) when a
/// tensor is not a contiguous f32 CPU tensor.
pub(super) fn step(
    params: &[Param],
    grads: &GradStore,
    moments: &[&Tensor],
    rule: Rule,
) -> candle_core::Result<Option<Vec<Tensor>>> {
    let Some(old) = moments
        .iter()
        .map(|m| host_values(m))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    let total = old.first().map_or(0, Vec::len);
    let mut new: Vec<Vec<f32>> = old;
    let mut weights = Vec::with_capacity(params.len());
    for param in params {
        let range = param.offset..param.offset + param.len;
        if range.end > total {
            return Ok(None);
        }
        let Some(g) = grads.get(param.var.as_tensor()) else {
            weights.push(None);
            continue;
        };
        let Some(mut theta) = host_values(param.var.as_tensor()) else {
            return Ok(None);
        };
        let updated = with_host_values(g, |g| {
            if g.len() != theta.len() {
                return false;
            }
            match rule {
                Rule::Adam {
                    beta1,
                    one_minus_beta1,
                    beta2,
                    one_minus_beta2,
                    correct1,
                    correct2,
                    eps,
                    lr,
                } => {
                    let (m, v) = match &mut new[..] {
                        [m, v] => (&mut m[range.clone()], &mut v[range.clone()]),
                        _ => return false,
                    };
                    for (((w, &g), m), v) in theta.iter_mut().zip(g).zip(m).zip(v) {
                        // The tensor form's ops: affine (x·a + 0), add,
                        // sqr, sqrt, div, sub, in its order.
                        *m = (*m * beta1 + 0.0) + (g * one_minus_beta1 + 0.0);
                        *v = (*v * beta2 + 0.0) + ((g * g) * one_minus_beta2 + 0.0);
                        let m_hat = *m * correct1 + 0.0;
                        let v_hat = *v * correct2 + 0.0;
                        let update = (m_hat / (v_hat.sqrt() * 1.0 + eps)) * lr + 0.0;
                        *w -= update;
                    }
                }
                Rule::RmsProp {
                    decay,
                    one_minus_decay,
                    eps,
                    lr,
                } => {
                    let ms = match &mut new[..] {
                        [ms] => &mut ms[range.clone()],
                        _ => return false,
                    };
                    for ((w, &g), ms) in theta.iter_mut().zip(g).zip(ms) {
                        *ms = (*ms * decay + 0.0) + ((g * g) * one_minus_decay + 0.0);
                        let update = (g / (*ms * 1.0 + eps).sqrt()) * lr + 0.0;
                        *w -= update;
                    }
                }
            }
            true
        });
        if updated != Some(true) {
            return Ok(None);
        }
        weights.push(Some(theta));
    }
    // Nothing failed: write the weights, then hand back the moments.
    for (param, theta) in params.iter().zip(weights) {
        if let Some(theta) = theta {
            let t = Tensor::from_vec(theta, param.var.shape(), param.var.device())?;
            param.var.set(&t)?;
        }
    }
    let device = params
        .first()
        .map_or(candle_core::Device::Cpu, |p| p.var.device().clone());
    new.into_iter()
        .map(|m| Tensor::from_vec(m, total, &device))
        .collect::<candle_core::Result<Vec<_>>>()
        .map(Some)
}
