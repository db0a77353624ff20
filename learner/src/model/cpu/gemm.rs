//! [`matmul`]: `dst (+)= a · b` on f32 slices, through the `gemm` crate
//! (candle's own CPU matrix product), with every view's bounds checked.
//!
//! Why not candle's `Tensor::matmul`: inside a custom op the operands are
//! slices of a storage, often one chunk of a batch, and the product must
//! land in (or add into) part of a buffer the op already owns; a tensor per
//! call would allocate and copy each time. `gemm` takes any row and column
//! strides, so a transposed operand is a view, never a copy.
//!
//! Threads: [`Threads::Serial`] inside a loop that is already spread over
//! the pool (one chunk of frames per task), [`Threads::Pool`] for one large
//! product (gemm splits it over candle's pool, `RAYON_NUM_THREADS`).
//!
//! Cost: what gemm costs; the checks are a few comparisons per call.

/// A read-only `rows x cols` view of `data`: element `(i, j)` is
/// `data[i * row_stride + j * col_stride]`.
#[derive(Debug, Clone, Copy)]
pub struct MatRef<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

/// A writable `rows x cols` row-major view of `data` (row `i` starts at
/// `i * row_stride`, its elements contiguous).
#[derive(Debug)]
pub struct MatMut<'a> {
    data: &'a mut [f32],
    rows: usize,
    cols: usize,
    row_stride: usize,
}

/// Why a view or a product was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GemmError {
    #[error("matrix view {rows}x{cols} (strides {row_stride}, {col_stride}) reaches past its {len} values")]
    OutOfBounds {
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
        len: usize,
    },
    #[error("matmul: {a_rows}x{a_cols} times {b_rows}x{b_cols} into {dst_rows}x{dst_cols}")]
    Shapes {
        a_rows: usize,
        a_cols: usize,
        b_rows: usize,
        b_cols: usize,
        dst_rows: usize,
        dst_cols: usize,
    },
}

impl From<GemmError> for candle_core::Error {
    fn from(e: GemmError) -> Self {
        candle_core::Error::Msg(e.to_string())
    }
}

/// Whether the elements `(i, j)`, `i < rows`, `j < cols`, all lie in `len`.
fn fits(rows: usize, cols: usize, row_stride: usize, col_stride: usize, len: usize) -> bool {
    if rows == 0 || cols == 0 {
        return true;
    }
    let last = (rows - 1).checked_mul(row_stride).and_then(|r| {
        (cols - 1)
            .checked_mul(col_stride)
            .and_then(|c| r.checked_add(c))
    });
    matches!(last, Some(last) if last < len)
}

impl<'a> MatRef<'a> {
    /// `data` as a strided `rows x cols` matrix (see the type's docs).
    pub fn new(
        data: &'a [f32],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Result<Self, GemmError> {
        if !fits(rows, cols, row_stride, col_stride, data.len()) {
            return Err(GemmError::OutOfBounds {
                rows,
                cols,
                row_stride,
                col_stride,
                len: data.len(),
            });
        }
        Ok(MatRef {
            data,
            rows,
            cols,
            row_stride,
            col_stride,
        })
    }

    /// The first `rows · cols` values of `data`, row-major.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Result<Self, GemmError> {
        Self::new(data, rows, cols, cols, 1)
    }

    /// The transpose, a view of the same values.
    pub fn t(self) -> Self {
        MatRef {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }
}

impl<'a> MatMut<'a> {
    /// The first `rows · cols` values of `data`, row-major.
    pub fn row_major(data: &'a mut [f32], rows: usize, cols: usize) -> Result<Self, GemmError> {
        if !fits(rows, cols, cols, 1, data.len()) {
            return Err(GemmError::OutOfBounds {
                rows,
                cols,
                row_stride: cols,
                col_stride: 1,
                len: data.len(),
            });
        }
        Ok(MatMut {
            data,
            rows,
            cols,
            row_stride: cols,
        })
    }
}

/// Floating-point operations below which work stays on the calling
/// thread: about 40 us on one core of the 2-core VMs, where waking
/// another thread costs 27-42 us.
pub const PARALLEL_MIN_FLOPS: usize = 4_000_000;

/// How a product may use candle's thread pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// On the calling thread only.
    Serial,
    /// Split over the pool's `n` threads (1 is [`Threads::Serial`]).
    Pool(usize),
}

impl Threads {
    /// The pool's `threads` for an `m x k` by `k x n` product of at least
    /// [`PARALLEL_MIN_FLOPS`], the calling thread for a smaller one.
    pub fn for_product(m: usize, n: usize, k: usize, threads: usize) -> Self {
        if threads > 1 && 2 * m * n * k >= PARALLEL_MIN_FLOPS {
            Threads::Pool(threads)
        } else {
            Threads::Serial
        }
    }
}

/// `dst = a · b`, or `dst += a · b` when `accumulate`.
pub fn matmul(
    dst: MatMut<'_>,
    a: MatRef<'_>,
    b: MatRef<'_>,
    accumulate: bool,
    threads: Threads,
) -> Result<(), GemmError> {
    if a.cols != b.rows || dst.rows != a.rows || dst.cols != b.cols {
        return Err(GemmError::Shapes {
            a_rows: a.rows,
            a_cols: a.cols,
            b_rows: b.rows,
            b_cols: b.cols,
            dst_rows: dst.rows,
            dst_cols: dst.cols,
        });
    }
    let (m, n, k) = (a.rows, b.cols, a.cols);
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        if !accumulate {
            for row in dst.data.chunks_mut(dst.row_stride).take(m) {
                row[..n].fill(0.0);
            }
        }
        return Ok(());
    }
    let parallelism = match threads {
        Threads::Pool(n) if n > 1 => gemm::Parallelism::Rayon(n),
        _ => gemm::Parallelism::None,
    };
    // SAFETY: `MatRef::new` and `MatMut::row_major` checked that every
    // element `(i, j)` of `a` (`m x k`), `b` (`k x n`) and `dst` (`m x n`)
    // lies inside its slice, and the shapes agree (checked above), so gemm
    // reads and writes only inside the three slices. `dst` is borrowed
    // mutably, so it aliases neither input, and its elements are distinct
    // (row-major rows `row_stride >= n` apart). gemm reads `dst` only when
    // `read_dst` (`accumulate`), and then `dst = 1·dst + 1·(a·b)`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.data.as_mut_ptr(),
            1,
            dst.row_stride as isize,
            accumulate,
            a.data.as_ptr(),
            a.col_stride as isize,
            a.row_stride as isize,
            b.data.as_ptr(),
            b.col_stride as isize,
            b.row_stride as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `a · b` by the definition, for strided views.
    fn naive(a: &MatRef<'_>, b: &MatRef<'_>) -> Vec<f32> {
        let mut out = vec![0f32; a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                let mut s = 0f64;
                for l in 0..a.cols {
                    let x = a.data[i * a.row_stride + l * a.col_stride];
                    let y = b.data[l * b.row_stride + j * b.col_stride];
                    s += f64::from(x) * f64::from(y);
                }
                out[i * b.cols + j] = s as f32;
            }
        }
        out
    }

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (((i + seed) * 7919) % 1009) as f32 / 1009.0 - 0.5)
            .collect()
    }

    fn assert_close(ours: &[f32], theirs: &[f32]) {
        for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "[{i}] {a} vs {b}");
        }
    }

    /// Plain, transposed and accumulated products of odd shapes, serial
    /// and on the pool, against the definition.
    #[test]
    fn products_of_views_match_the_definition() -> Result<(), GemmError> {
        for (m, n, k) in [(1, 1, 1), (3, 17, 5), (17, 3, 40), (64, 16, 256)] {
            let a_data = values(m * k, 1);
            let b_data = values(k * n, 2);
            // `b` stored transposed (`[n, k]`), read through a view.
            let b_t: Vec<f32> = (0..n * k).map(|i| b_data[(i % k) * n + i / k]).collect();
            let a = MatRef::row_major(&a_data, m, k)?;
            let b = MatRef::row_major(&b_data, k, n)?;
            let b_view = MatRef::row_major(&b_t, n, k)?.t();
            let want = naive(&a, &b);
            for threads in [Threads::Serial, Threads::Pool(2)] {
                let mut dst = vec![f32::NAN; m * n];
                matmul(
                    MatMut::row_major(&mut dst, m, n)?,
                    a,
                    b_view,
                    false,
                    threads,
                )?;
                assert_close(&dst, &want);
                // Accumulating adds the product again.
                matmul(MatMut::row_major(&mut dst, m, n)?, a, b, true, threads)?;
                let twice: Vec<f32> = want.iter().map(|v| 2.0 * v).collect();
                assert_close(&dst, &twice);
            }
        }
        Ok(())
    }

    #[test]
    fn views_past_their_slice_and_mismatched_shapes_are_refused() {
        let data = vec![0f32; 12];
        assert!(MatRef::row_major(&data, 3, 4).is_ok());
        assert!(matches!(
            MatRef::row_major(&data, 4, 4),
            Err(GemmError::OutOfBounds { .. })
        ));
        assert!(MatRef::new(&data, 4, 3, 1, 4).is_ok());
        assert!(MatRef::new(&data, 4, 3, 1, 5).is_err());
        assert!(MatRef::new(&data, 2, 2, usize::MAX, 1).is_err());
        let mut out = vec![0f32; 12];
        assert!(MatMut::row_major(&mut out, 2, 7).is_err());
        let a = MatRef::row_major(&data, 3, 4).unwrap();
        let e = matmul(
            MatMut::row_major(&mut out, 3, 3).unwrap(),
            a,
            a,
            false,
            Threads::Serial,
        )
        .unwrap_err();
        assert!(matches!(e, GemmError::Shapes { .. }), "{e}");
    }

    #[test]
    fn an_empty_inner_dimension_zeroes_or_keeps() -> Result<(), GemmError> {
        let (a_data, b_data) = (Vec::new(), Vec::new());
        let a = MatRef::row_major(&a_data, 2, 0)?;
        let b = MatRef::row_major(&b_data, 0, 3)?;
        let mut dst = vec![1f32; 6];
        matmul(
            MatMut::row_major(&mut dst, 2, 3)?,
            a,
            b,
            true,
            Threads::Serial,
        )?;
        assert_eq!(dst, [1.0; 6]);
        matmul(
            MatMut::row_major(&mut dst, 2, 3)?,
            a,
            b,
            false,
            Threads::Serial,
        )?;
        assert_eq!(dst, [0.0; 6]);
        Ok(())
    }
}
