//! Global-norm gradient clipping (TF's `clip_by_global_norm`).
use candle_core::backprop::GradStore;
use candle_core::{DType, Tensor, Var};

use crate::learn::optimizer::error::OptimizerError;

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
pub(super) fn scale_to_norm<'a>(
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
