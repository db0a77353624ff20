//! `xs + bias` over the last dimension, for f32 tensors on the CPU, with a
//! bias gradient that is one pass over the rows.
//!
//! Why: candle 0.11 takes the gradient of `broadcast_add(bias)` as
//! `grad.sum_keepdim(0)` (over every leading dimension), and its CPU
//! reduction over leading dimensions divides each element's index by every
//! reduced stride: two integer divisions per element. For the CartPole MLP
//! (four biases, 272 rows) that was 17% of a training step (`perf`); for
//! MinAtar's first conv layer (`B·8·8` rows of 16) it is every output
//! element of the layer. Here the bias gradient adds the gradient's rows
//! into one accumulator row, a loop the compiler vectorises.
//!
//! Forward and values are those of `xs.broadcast_add(bias)`; the gradient
//! of `xs` is the incoming gradient itself (tested against candle's op).
//! On other devices and dtypes [`bias_add`] calls `broadcast_add`.
use candle_core::{CpuStorage, CustomOp1, CustomOp2, DType, Layout, Result, Shape, Tensor};

use super::contiguous_f32;

/// `xs + bias`, `bias` `[O]` broadcast over `xs`'s leading dimensions
/// (`xs` `[..., O]`): the row-sum op for f32 on the CPU, candle's elsewhere.
pub fn bias_add(xs: &Tensor, bias: &Tensor) -> Result<Tensor> {
    if xs.device().is_cpu() && xs.dtype() == DType::F32 && bias.dtype() == DType::F32 {
        // Both ops read contiguous slices; `contiguous` is free when the
        // input already is (a matrix product's output and a variable are).
        xs.contiguous()?.apply_op2(&bias.contiguous()?, RowBiasAdd)
    } else {
        xs.broadcast_add(bias)
    }
}

/// The candle op behind [`bias_add`].
#[derive(Debug, Clone, Copy)]
struct RowBiasAdd;

/// `xs`'s rows of `bias.len()` as a contiguous slice, checking the shapes.
fn rows<'a>(op: &str, storage: &'a CpuStorage, layout: &Layout, width: usize) -> Result<&'a [f32]> {
    let rows = contiguous_f32(op, "input", storage, layout)?;
    if layout.dims().last() != Some(&width) || width == 0 {
        candle_core::bail!(
            "{op}: input {:?} does not end in the bias width {width}",
            layout.dims()
        );
    }
    Ok(rows)
}

impl CustomOp2 for RowBiasAdd {
    fn name(&self) -> &'static str {
        "row-bias-add"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        if l2.dims().len() != 1 {
            candle_core::bail!("row-bias-add: bias must be rank 1, got {:?}", l2.dims());
        }
        let bias = rows(self.name(), s2, l2, l2.dims()[0])?;
        let xs = rows(self.name(), s1, l1, bias.len())?;
        let mut out = Vec::with_capacity(xs.len());
        for row in xs.chunks_exact(bias.len()) {
            out.extend(row.iter().zip(bias).map(|(x, b)| x + b));
        }
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }

    fn bwd(
        &self,
        _xs: &Tensor,
        _bias: &Tensor,
        _res: &Tensor,
        grad_res: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let grad_bias = grad_res.contiguous()?.apply_op1_no_bwd(&ColumnSum)?;
        Ok((Some(grad_res.clone()), Some(grad_bias)))
    }
}

/// `[..., O]` -> `[O]`: the sum of all rows (the bias gradient).
#[derive(Debug, Clone, Copy)]
struct ColumnSum;

impl CustomOp1 for ColumnSum {
    fn name(&self) -> &'static str {
        "column-sum"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let width = layout.dims().last().copied().unwrap_or(0);
        let xs = rows(self.name(), storage, layout, width)?;
        let mut sum = vec![0f32; width];
        for row in xs.chunks_exact(width) {
            for (s, x) in sum.iter_mut().zip(row) {
                *s += x;
            }
        }
        Ok((CpuStorage::F32(sum), Shape::from(width)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// Uniform in [-1, 1): distinct values, so a wrong axis shows.
    fn random(shape: &[usize]) -> Tensor {
        Tensor::rand(-1f32, 1f32, shape, &Device::Cpu).unwrap()
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b)
            .and_then(|d| d.abs()?.max_all()?.to_scalar::<f32>())
            .unwrap()
    }

    /// Values and both gradients match `broadcast_add`, for rank 2 and 3
    /// inputs, under a loss that weights every output differently (so a
    /// gradient summed over the wrong axis would differ).
    #[test]
    fn matches_broadcast_add_values_and_gradients() {
        for shape in [vec![7, 5], vec![3, 4, 6], vec![1, 1], vec![272, 64]] {
            let width = *shape.last().unwrap();
            let x = Var::from_tensor(&random(&shape)).unwrap();
            let b = Var::from_tensor(&random(&[width])).unwrap();
            let weights = random(&shape);

            let ours = bias_add(x.as_tensor(), b.as_tensor()).unwrap();
            let theirs = x.as_tensor().broadcast_add(b.as_tensor()).unwrap();
            assert!(
                max_diff(&ours, &theirs) == 0.0,
                "values differ for {shape:?}"
            );

            let g_ours = (&ours * &weights)
                .unwrap()
                .sum_all()
                .unwrap()
                .backward()
                .unwrap();
            let g_theirs = (&theirs * &weights)
                .unwrap()
                .sum_all()
                .unwrap()
                .backward()
                .unwrap();
            for var in [&x, &b] {
                let (a, c) = (g_ours.get(var).unwrap(), g_theirs.get(var).unwrap());
                assert_eq!(a.dims(), c.dims(), "gradient shape for {shape:?}");
                assert!(max_diff(a, c) < 1e-4, "gradient differs for {shape:?}");
            }
        }
    }

    /// A non-contiguous input (a transpose) is made contiguous first.
    #[test]
    fn transposed_input_gives_the_same_values() {
        let x = random(&[5, 3]).t().unwrap();
        let b = random(&[5]);
        let ours = bias_add(&x, &b).unwrap();
        let theirs = x.broadcast_add(&b).unwrap();
        assert!(max_diff(&ours, &theirs) == 0.0);
    }

    #[test]
    fn a_bias_of_the_wrong_width_is_an_error() {
        let err = bias_add(&random(&[4, 3]), &random(&[4])).unwrap_err();
        assert!(err.to_string().contains("bias width 4"), "{err}");
    }

    #[test]
    fn other_dtypes_use_candle() {
        let x = random(&[2, 3]).to_dtype(DType::BF16).unwrap();
        let b = random(&[3]).to_dtype(DType::BF16).unwrap();
        let ours = bias_add(&x, &b).unwrap();
        assert_eq!(ours.dtype(), DType::BF16);
        let theirs = x.broadcast_add(&b).unwrap();
        assert!(
            max_diff(
                &ours.to_dtype(DType::F32).unwrap(),
                &theirs.to_dtype(DType::F32).unwrap()
            ) == 0.0
        );
    }
}
