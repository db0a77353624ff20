//! MLP torso for vector observations: `[B, D] -> [B, H_last]`, tanh between
//! layers (tanh keeps CartPole-sized policies well conditioned; CleanRL's
//! choice too). Each layer and its tanh is one op on the CPU
//! ([`super::cpu::dense_act`]), the tanh vectorised ([`super::cpu::tanh`]).
use candle_core::{Module, Result, Tensor};
use candle_nn::VarBuilder;

use super::cpu::dense_act::Activation;
use super::dense::Dense;

#[derive(Debug, Clone)]
pub struct Mlp {
    layers: Vec<Dense>,
    out_dim: usize,
}

impl Mlp {
    pub fn new(in_dim: usize, hidden_sizes: &[usize], vb: VarBuilder) -> Result<Self> {
        let mut layers = Vec::with_capacity(hidden_sizes.len());
        let mut width = in_dim;
        for (i, &h) in hidden_sizes.iter().enumerate() {
            layers.push(Dense::new(width, h, vb.pp(i))?);
            width = h;
        }
        Ok(Mlp {
            layers,
            out_dim: width,
        })
    }

    pub fn out_dim(&self) -> usize {
        self.out_dim
    }

    /// The layers, input first (tanh follows each).
    pub fn layers(&self) -> &[Dense] {
        &self.layers
    }
}

impl Module for Mlp {
    /// `xs`: `[B, ...]`, flattened to `[B, D]`.
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let mut x = xs.flatten_from(1)?;
        for layer in &self.layers {
            x = layer.forward_act(&x, Activation::Tanh)?;
        }
        Ok(x)
    }
}
