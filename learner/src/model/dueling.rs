//! R2D2's dueling head: Q-values from the model's two heads, so the same
//! [`crate::model::ActorCritic`] serves both algorithms.
use candle_core::{Result, Tensor};

/// Dueling Q-values (Wang et al., 2016) from a model's two heads:
/// `Q(x, a) = V(x) + A(x, a) − mean_a A(x, a)`, with the policy head's
/// outputs as the advantages `A` (`[..., A]`) and the value head's as `V`
/// (`[...]`). The mean makes `V` and `A` identifiable; the greedy action is
/// the advantages' argmax.
pub fn dueling_q(advantages: &Tensor, values: &Tensor) -> Result<Tensor> {
    let centred = advantages.broadcast_sub(&advantages.mean_keepdim(candle_core::D::Minus1)?)?;
    centred.broadcast_add(&values.unsqueeze(candle_core::D::Minus1)?)
}
