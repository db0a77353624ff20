//! [`dense_act`]: `act(x Wᵀ + b)` for f32 tensors on the CPU as one op,
//! with its backward: every dense layer of the networks (the MLP's with
//! tanh, the conv torso's last with ReLU, the heads with none).
//!
//! # Why
//! Built from candle ops, a layer is a transposed view of the weight, a
//! matmul, a bias add and an activation: four nodes in the autograd
//! graph. candle's backward accumulates the gradient of every node into a
//! fresh zeroed tensor (a fill and an add per node), and takes an
//! activation's gradient in several passes (a compare, a cast, a product
//! for a ReLU). For MinAtar's `[336, 1024] -> 256` layer that was a fill
//! and an add over each of the four nodes' gradients per step. Here the
//! layer is one node: its backward computes the activation's gradient in
//! one pass and then the three products.
//!
//! # What it computes
//! Forward: `y = act(x Wᵀ + b)`, `x` `[N, I]`, `W` `[O, I]`, `b` `[O]`:
//! the product in candle's gemm with candle's strides (the same call
//! `x.matmul(&w.t())` makes, so the same values), then the bias and the
//! activation in one pass. Backward, with `G = dy · act'(y)` (`1 − y²` for
//! tanh, `y > 0` for ReLU: candle's ReLU passes the gradient at exactly
//! zero too, a set of measure zero): `db = Σ_rows G`, `dW = Gᵀ x`, and
//! `dx = G W` when `x` is part of the graph. Products of less than
//! [`super::gemm::PARALLEL_MIN_FLOPS`] stay on the calling thread (candle's
//! `matmul` splits every product over the pool: a 272-row CartPole layer
//! took longer on two threads than on one).
//!
//! # Cost
//! The three products (`2·N·I·O` flops each), one pass over `y` each
//! way, no weight copy.
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Layout, Result, Shape, Tensor};

use super::contiguous_f32;
use super::gemm::{matmul, MatMut, MatRef, Threads};
use super::tanh::tanh_f32;

/// What follows the bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    None,
    Relu,
    Tanh,
}

impl Activation {
    /// `act(v)`.
    #[inline]
    pub fn apply(self, v: f32) -> f32 {
        match self {
            Activation::None => v,
            Activation::Relu => v.max(0.0),
            Activation::Tanh => tanh_f32(v),
        }
    }

    /// `dy · act'(x)` from the output `y = act(x)`.
    #[inline]
    fn grad(self, y: f32, dy: f32) -> f32 {
        match self {
            Activation::None => dy,
            Activation::Relu => {
                if y > 0.0 {
                    dy
                } else {
                    0.0
                }
            }
            Activation::Tanh => dy * (1.0 - y * y),
        }
    }
}

/// Whether [`dense_act`] takes the op for these tensors (f32 on the CPU).
pub fn takes(x: &Tensor, weight: &Tensor, bias: &Tensor) -> bool {
    x.device().is_cpu()
        && [x.dtype(), weight.dtype(), bias.dtype()]
            .iter()
            .all(|&d| d == DType::F32)
}

/// `act(x Wᵀ + b)` for `x` `[N, I]`, `weight` `[O, I]`, `bias` `[O]`, f32
/// on the CPU (see [`takes`]), as one op; `[N, O]` out.
pub fn dense_act(x: &Tensor, weight: &Tensor, bias: &Tensor, act: Activation) -> Result<Tensor> {
    x.contiguous()?
        .apply_op3(&weight.contiguous()?, &bias.contiguous()?, DenseAct(act))
}

/// The op behind [`dense_act`].
#[derive(Debug, Clone, Copy)]
struct DenseAct(Activation);

impl CustomOp3 for DenseAct {
    fn name(&self) -> &'static str {
        "dense-act"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(self.name(), "the input", s1, l1)?;
        let w = contiguous_f32(self.name(), "the weight", s2, l2)?;
        let b = contiguous_f32(self.name(), "the bias", s3, l3)?;
        let (n, i) = l1.shape().dims2()?;
        let (o, wi) = l2.shape().dims2()?;
        if wi != i || b.len() != o {
            candle_core::bail!(
                "dense-act: input [{n}, {i}], weight [{o}, {wi}] and bias [{}] do not fit",
                b.len()
            );
        }
        let mut y = vec![0f32; n * o];
        let threads = super::pool_threads();
        matmul(
            MatMut::row_major(&mut y, n, o)?,
            MatRef::row_major(x, n, i)?,
            MatRef::row_major(w, o, i)?.t(),
            false,
            Threads::for_product(n, o, i, threads),
        )?;
        if o > 0 {
            for row in y.chunks_exact_mut(o) {
                for (v, bias) in row.iter_mut().zip(b) {
                    *v = self.0.apply(*v + bias);
                }
            }
        }
        Ok((CpuStorage::F32(y), Shape::from((n, o))))
    }

    fn bwd(
        &self,
        x: &Tensor,
        weight: &Tensor,
        bias: &Tensor,
        res: &Tensor,
        grad_res: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let g = match self.0 {
            Activation::None => grad_res.contiguous()?,
            act => res.apply_op2_no_bwd(&grad_res.contiguous()?, &ActGrad(act))?,
        };
        let input_grad = x.track_op();
        // `[O·I + O (+ N·I)]`: the weight's, the bias's and the input's
        // gradients.
        let grads = x.apply_op3_no_bwd(weight, &g, &DenseGrad { input_grad })?;
        super::split_layer_grads(&grads, weight, bias, input_grad.then_some(x))
    }
}

/// `(x [N, I], W [O, I], G [N, O])` to `[dW = Gᵀ x, db = Σ_rows G, dx = G W]`
/// flat (`dx` only when asked).
#[derive(Debug, Clone, Copy)]
struct DenseGrad {
    input_grad: bool,
}

impl CustomOp3 for DenseGrad {
    fn name(&self) -> &'static str {
        "dense-act-backward"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(self.name(), "the input", s1, l1)?;
        let w = contiguous_f32(self.name(), "the weight", s2, l2)?;
        let g = contiguous_f32(self.name(), "the gradient", s3, l3)?;
        let (n, i) = l1.shape().dims2()?;
        let (o, _) = l2.shape().dims2()?;
        let threads = super::pool_threads();
        let len = o * i + o + if self.input_grad { n * i } else { 0 };
        let mut flat = vec![0f32; len];
        let (dw, rest) = flat.split_at_mut(o * i);
        let (db, dx) = rest.split_at_mut(o);
        let grad = MatRef::row_major(g, n, o)?;
        matmul(
            MatMut::row_major(dw, o, i)?,
            grad.t(),
            MatRef::row_major(x, n, i)?,
            false,
            Threads::for_product(o, i, n, threads),
        )?;
        if o > 0 {
            for row in g.chunks_exact(o) {
                for (s, v) in db.iter_mut().zip(row) {
                    *s += v;
                }
            }
        }
        if self.input_grad {
            matmul(
                MatMut::row_major(dx, n, i)?,
                grad,
                MatRef::row_major(w, o, i)?,
                false,
                Threads::for_product(n, i, o, threads),
            )?;
        }
        Ok((CpuStorage::F32(flat), Shape::from(len)))
    }
}

/// `(y, dy)` to `dy · act'(y)`, elementwise.
#[derive(Debug, Clone, Copy)]
struct ActGrad(Activation);

impl CustomOp2 for ActGrad {
    fn name(&self) -> &'static str {
        "dense-act-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let y = contiguous_f32(self.name(), "the output", s1, l1)?;
        let dy = contiguous_f32(self.name(), "the output's gradient", s2, l2)?;
        if y.len() != dy.len() {
            candle_core::bail!(
                "dense-act-grad: {} outputs, {} gradients",
                y.len(),
                dy.len()
            );
        }
        let g = y.iter().zip(dy).map(|(&y, &d)| self.0.grad(y, d)).collect();
        Ok((CpuStorage::F32(g), l1.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (((i + seed) * 7919) % 2003) as f32 / 1001.0 - 1.0)
            .collect()
    }

    /// The same layer from candle ops: matmul, bias add, activation (the
    /// vectorised tanh the MLP used, the same function as this op's: with
    /// libm's, saturated units' `1 − y²` differ in relative terms).
    fn candle_layer(x: &Tensor, w: &Tensor, b: &Tensor, act: Activation) -> Result<Tensor> {
        let y = x.matmul(&w.t()?)?.broadcast_add(b)?;
        match act {
            Activation::None => Ok(y),
            Activation::Relu => y.relu(),
            Activation::Tanh => super::super::tanh::tanh(&y),
        }
    }

    fn assert_close(ours: &Tensor, theirs: &Tensor, what: &str) -> Result<()> {
        assert_eq!(ours.dims(), theirs.dims(), "{what}: shapes");
        let scale = theirs.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
        let diff = (ours - theirs)?
            .abs()?
            .flatten_all()?
            .max(0)?
            .to_scalar::<f32>()?;
        assert!(
            diff <= 1e-5 * scale.max(1e-6),
            "{what}: {diff} apart at a scale of {scale}"
        );
        Ok(())
    }

    /// Values and the gradients of the input, weight and bias against the
    /// layer built from candle ops, for each activation, 1, 3 and 17 rows.
    #[test]
    fn matches_candle_ops_values_and_gradients() -> Result<()> {
        let dev = Device::Cpu;
        for (i, o) in [(4, 64), (33, 7), (256, 1)] {
            let w = Var::from_vec(values(o * i, 1), (o, i), &dev)?;
            let b = Var::from_vec(values(o, 2), o, &dev)?;
            for act in [Activation::None, Activation::Relu, Activation::Tanh] {
                for n in [1, 3, 17] {
                    let case = format!("{i} -> {o} {act:?}, {n} rows");
                    let x = Var::from_vec(values(n * i, 3), (n, i), &dev)?;
                    let ours = dense_act(x.as_tensor(), w.as_tensor(), b.as_tensor(), act)?;
                    let theirs = candle_layer(x.as_tensor(), w.as_tensor(), b.as_tensor(), act)?;
                    assert_close(&ours, &theirs, &format!("{case}: values"))?;
                    let mix = Tensor::from_vec(values(n * o, 4), (n, o), &dev)?;
                    let g_ours = (&ours * &mix)?.sum_all()?.backward()?;
                    let g_theirs = (&theirs * &mix)?.sum_all()?.backward()?;
                    for (name, var) in [("input", &x), ("weight", &w), ("bias", &b)] {
                        let (a, c) = (
                            g_ours.get(var).expect("ours"),
                            g_theirs.get(var).expect("candle's"),
                        );
                        assert_close(a, c, &format!("{case}: gradient of the {name}"))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The forward is the same gemm call as candle's `x.matmul(&w.t())`:
    /// the same bits before the bias.
    #[test]
    fn the_product_is_candles_to_the_bit() -> Result<()> {
        let dev = Device::Cpu;
        let x = Tensor::from_vec(values(37 * 50, 5), (37, 50), &dev)?;
        let w = Tensor::from_vec(values(20 * 50, 6), (20, 50), &dev)?;
        let b = Tensor::zeros(20, DType::F32, &dev)?;
        let ours = dense_act(&x, &w, &b, Activation::None)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let theirs = x.matmul(&w.t()?)?.flatten_all()?.to_vec1::<f32>()?;
        assert_eq!(ours, theirs);
        Ok(())
    }

    /// An input that is no part of the graph gets no gradient, and the
    /// weights still do.
    #[test]
    fn a_constant_input_gets_no_gradient() -> Result<()> {
        let dev = Device::Cpu;
        let w = Var::from_vec(values(6, 7), (2, 3), &dev)?;
        let b = Var::from_vec(values(2, 8), 2, &dev)?;
        let x = Tensor::from_vec(values(12, 9), (4, 3), &dev)?;
        let grads = dense_act(&x, w.as_tensor(), b.as_tensor(), Activation::Relu)?
            .sum_all()?
            .backward()?;
        assert!(grads.get(&x).is_none());
        assert!(grads.get(&w).is_some() && grads.get(&b).is_some());
        Ok(())
    }

    #[test]
    fn mismatched_shapes_are_refused() {
        let dev = Device::Cpu;
        let x = Tensor::zeros((2, 3), DType::F32, &dev).unwrap();
        let w = Tensor::zeros((4, 5), DType::F32, &dev).unwrap();
        let b = Tensor::zeros(4, DType::F32, &dev).unwrap();
        let e = dense_act(&x, &w, &b, Activation::None).unwrap_err();
        assert!(e.to_string().contains("do not fit"), "{e}");
    }
}
