//! [`Dense`]: a fully connected layer and its activation, `act(x Wᵀ + b)`:
//! one op for f32 on the CPU ([`super::cpu::dense_act`], whose backward
//! takes the activation's gradient in one pass), candle's matmul and
//! [`super::cpu::bias_add`] elsewhere.
//!
//! Built by `candle_nn::linear`, so the weights are the same tensors under
//! the same names (`weight` `[O, I]`, `bias` `[O]`) with the same
//! initialisation, and checkpoints do not change; only the gradient's
//! arithmetic differs (see those ops' docs for why and what they cost).
use candle_core::{Module, Result, Tensor};
use candle_nn::VarBuilder;

use super::cpu::bias_add::bias_add;
use super::cpu::dense_act::{self, Activation};

#[derive(Debug, Clone)]
pub struct Dense {
    /// `[O, I]`.
    weight: Tensor,
    /// `[O]`.
    bias: Tensor,
}

impl Dense {
    /// An `in_dim -> out_dim` layer with weights `weight` and `bias` under `vb`.
    pub fn new(in_dim: usize, out_dim: usize, vb: VarBuilder) -> Result<Self> {
        let linear = candle_nn::linear(in_dim, out_dim, vb)?;
        let Some(bias) = linear.bias().cloned() else {
            candle_core::bail!("dense: candle_nn::linear built no bias");
        };
        Ok(Dense {
            weight: linear.weight().clone(),
            bias,
        })
    }

    /// `[O, I]`.
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// `[O]`.
    pub fn bias(&self) -> &Tensor {
        &self.bias
    }
}

impl Dense {
    /// `act(xs Wᵀ + b)`: `xs` `[..., I]`, `[..., O]` out, one matrix
    /// product over all leading dimensions (as `candle_nn::Linear` does; a
    /// broadcast matmul is slower).
    pub fn forward_act(&self, xs: &Tensor, act: Activation) -> Result<Tensor> {
        let (rows, out_dims) = match xs.dims() {
            [] => candle_core::bail!("dense: a scalar input has no features"),
            [_, _] => (xs.clone(), None),
            [.., i] => {
                let mut out_dims = xs.dims().to_vec();
                if let Some(last) = out_dims.last_mut() {
                    *last = self.weight.dim(0)?;
                }
                (xs.contiguous()?.reshape(((), *i))?, Some(out_dims))
            }
        };
        let y = if dense_act::takes(&rows, &self.weight, &self.bias) {
            dense_act::dense_act(&rows, &self.weight, &self.bias, act)?
        } else {
            let y = bias_add(&rows.matmul(&self.weight.t()?)?, &self.bias)?;
            match act {
                Activation::None => y,
                Activation::Relu => y.relu()?,
                Activation::Tanh => super::cpu::tanh::tanh(&y)?,
            }
        };
        match out_dims {
            Some(dims) => y.reshape(dims),
            None => Ok(y),
        }
    }
}

impl Module for Dense {
    /// `xs Wᵀ + b`: `xs` `[..., I]`; `[..., O]` out.
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        self.forward_act(xs, Activation::None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};
    use candle_nn::VarMap;

    /// Same weights, same names, same output and gradients as
    /// `candle_nn::Linear` over them, for rank 2 and rank 3 inputs.
    #[test]
    fn matches_candle_linear_on_the_same_weights() {
        let map = VarMap::new();
        let vb = VarBuilder::from_varmap(&map, DType::F32, &Device::Cpu);
        let dense = Dense::new(6, 4, vb.pp("layer")).unwrap();
        let mut names: Vec<_> = map.data().lock().unwrap().keys().cloned().collect();
        names.sort();
        assert_eq!(names, ["layer.bias", "layer.weight"]);
        let linear = candle_nn::Linear::new(dense.weight.clone(), Some(dense.bias.clone()));

        for shape in [vec![5, 6], vec![3, 2, 6]] {
            let x = Tensor::randn(0f32, 1., shape.as_slice(), &Device::Cpu).unwrap();
            let (ours, theirs) = (dense.forward(&x).unwrap(), linear.forward(&x).unwrap());
            assert_eq!(ours.dims(), theirs.dims());
            let diff = (&ours - &theirs).unwrap().abs().unwrap().max_all().unwrap();
            assert!(diff.to_scalar::<f32>().unwrap() < 1e-6);

            let loss = |y: &Tensor| (y.sqr().unwrap().sum_all().unwrap()).backward().unwrap();
            let (g_ours, g_theirs) = (loss(&ours), loss(&theirs));
            for var in map.all_vars() {
                let (a, b) = (g_ours.get(&var).unwrap(), g_theirs.get(&var).unwrap());
                let diff = (a - b).unwrap().abs().unwrap().max_all().unwrap();
                assert!(diff.to_scalar::<f32>().unwrap() < 1e-4, "{shape:?}");
            }
        }
    }
}
