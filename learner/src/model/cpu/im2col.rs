//! Patches of a frame as the rows of a matrix (`im2col`), and the
//! reverse, adding rows back into a frame's gradient (`col2im`): how a
//! convolution becomes one matrix product ([`super::conv`]).
//!
//! Layout: a frame is `[C, H, W]` channel-major; its patch matrix is
//! `[P, C·k·k]`, one row per output position `(oy, ox)` (row-major over
//! `Ho x Wo`), the row's elements in `(c, ky, kx)` order, the order of a
//! conv weight `[O, C, k, k]` flattened per output channel. So a row is
//! `C·k` runs of `k` contiguous input values: copies, not gathers.
//!
//! Cost: `P·C·k·k` values written (or added) per frame; for the Atari
//! torso's first layer 102k per frame, a quarter of the time of the
//! matrix product they feed.

/// A convolution's shapes: `[C, H, W]` frames to `[O, Ho, Wo]` by a
/// `k x k` kernel with `stride`, no padding, no dilation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvGeometry {
    pub in_channels: usize,
    pub height: usize,
    pub width: usize,
    pub out_channels: usize,
    pub kernel: usize,
    pub stride: usize,
}

impl ConvGeometry {
    /// The geometry, or why the kernel does not fit the frame.
    pub fn new(
        [in_channels, height, width]: [usize; 3],
        out_channels: usize,
        kernel: usize,
        stride: usize,
    ) -> Result<Self, String> {
        if kernel == 0 || stride == 0 || height < kernel || width < kernel || in_channels == 0 {
            return Err(format!(
                "conv: kernel {kernel} stride {stride} does not fit a \
                 {:?} frame",
                [in_channels, height, width]
            ));
        }
        Ok(ConvGeometry {
            in_channels,
            height,
            width,
            out_channels,
            kernel,
            stride,
        })
    }

    /// `(Ho, Wo)`.
    pub fn out_hw(&self) -> (usize, usize) {
        (
            (self.height - self.kernel) / self.stride + 1,
            (self.width - self.kernel) / self.stride + 1,
        )
    }

    /// `P = Ho·Wo`, output positions per frame.
    pub fn positions(&self) -> usize {
        let (ho, wo) = self.out_hw();
        ho * wo
    }

    /// `C·k·k`, values per patch.
    pub fn patch_len(&self) -> usize {
        self.in_channels * self.kernel * self.kernel
    }

    /// `C·H·W`, values per input frame.
    pub fn frame_len(&self) -> usize {
        self.in_channels * self.height * self.width
    }

    /// `O·P`, values per output frame.
    pub fn out_len(&self) -> usize {
        self.out_channels * self.positions()
    }
}

/// Input frames: f32, or u8 scaled by a factor on the way in (the
/// observations, `1/255`).
#[derive(Debug, Clone, Copy)]
pub enum Frames<'a> {
    F32(&'a [f32]),
    U8(&'a [u8], f32),
}

impl Frames<'_> {
    pub fn len(&self) -> usize {
        match self {
            Frames::F32(v) => v.len(),
            Frames::U8(v, _) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frames `first..first + count` of `frame_len` values each.
    pub fn range(&self, first: usize, count: usize, frame_len: usize) -> Self {
        let r = first * frame_len..(first + count) * frame_len;
        match *self {
            Frames::F32(v) => Frames::F32(&v[r]),
            Frames::U8(v, s) => Frames::U8(&v[r], s),
        }
    }
}

/// Writes the patch rows of output lines `first..first + lines` of the
/// batch into `cols` (`[lines·Wo, C·k·k]`). Line `L` is output row `L %
/// Ho` of frame `L / Ho`, so the lines of a batch are the rows of its
/// whole patch matrix, `Wo` at a time, and any range of them is a block of
/// that matrix. u8 frames have the input rows those lines read scaled into
/// `frame` first.
pub fn im2col(
    g: &ConvGeometry,
    frames: Frames<'_>,
    first: usize,
    lines: usize,
    cols: &mut [f32],
    frame: &mut Vec<f32>,
) {
    let (ho, wo) = g.out_hw();
    let (frame_len, line_len) = (g.frame_len(), wo * g.patch_len());
    let mut line = first;
    let mut cols = &mut cols[..lines * line_len];
    while line < first + lines {
        let (f, oy) = (line / ho, line % ho);
        let n = (ho - oy).min(first + lines - line);
        let (out, rest) = cols.split_at_mut(n * line_len);
        cols = rest;
        let src = match frames {
            Frames::F32(v) => &v[f * frame_len..(f + 1) * frame_len],
            Frames::U8(v, scale) => {
                scale_rows(
                    g,
                    &v[f * frame_len..(f + 1) * frame_len],
                    scale,
                    oy..oy + n,
                    frame,
                );
                &frame[..]
            }
        };
        match g.kernel {
            3 => frame_patches::<3>(g, src, oy..oy + n, out),
            4 => frame_patches::<4>(g, src, oy..oy + n, out),
            8 => frame_patches::<8>(g, src, oy..oy + n, out),
            _ => frame_patches_any(g, src, oy..oy + n, out),
        }
        line += n;
    }
}

/// The input rows output lines `oys` read, of each channel, scaled from
/// the u8 `src` into the f32 frame `frame` (the rest left as it was).
fn scale_rows(
    g: &ConvGeometry,
    src: &[u8],
    scale: f32,
    oys: std::ops::Range<usize>,
    frame: &mut Vec<f32>,
) {
    frame.resize(g.frame_len(), 0.0);
    let w = g.width;
    let plane = g.height * w;
    let rows = oys.start * g.stride..(oys.end - 1) * g.stride + g.kernel;
    for c in 0..g.in_channels {
        let span = c * plane + rows.start * w..c * plane + rows.end * w;
        for (d, &x) in frame[span.clone()].iter_mut().zip(&src[span]) {
            *d = f32::from(x) * scale;
        }
    }
}

/// Output lines `oys` of one frame's patches for a `K x K` kernel: each
/// run of `K` values is a fixed-size copy (a register or two), not a
/// `memcpy` call. Loops go output row, channel, kernel row, output
/// column, so the input row being read stays in L1 while its runs land in
/// one output row's patches.
fn frame_patches<const K: usize>(
    g: &ConvGeometry,
    src: &[f32],
    oys: std::ops::Range<usize>,
    out: &mut [f32],
) {
    let (s, w) = (g.stride, g.width);
    let wo = g.out_hw().1;
    let patch_len = g.patch_len();
    let plane = g.height * w;
    for (oy, rows) in oys.zip(out.chunks_exact_mut(wo * patch_len)) {
        for c in 0..g.in_channels {
            for ky in 0..K {
                let line = &src[c * plane + (oy * s + ky) * w..][..w];
                let at = (c * K + ky) * K;
                for (ox, patch) in rows.chunks_exact_mut(patch_len).enumerate() {
                    let run: &[f32; K] = line[ox * s..ox * s + K]
                        .try_into()
                        .expect("a run of K values");
                    let dst: &mut [f32; K] = (&mut patch[at..at + K])
                        .try_into()
                        .expect("a run of K values");
                    *dst = *run;
                }
            }
        }
    }
}

/// [`frame_patches`] for any kernel size.
fn frame_patches_any(g: &ConvGeometry, src: &[f32], oys: std::ops::Range<usize>, out: &mut [f32]) {
    let (k, s, w) = (g.kernel, g.stride, g.width);
    let wo = g.out_hw().1;
    let patch_len = g.patch_len();
    let plane = g.height * w;
    for (oy, rows) in oys.zip(out.chunks_exact_mut(wo * patch_len)) {
        for c in 0..g.in_channels {
            for ky in 0..k {
                let line = &src[c * plane + (oy * s + ky) * w..][..w];
                let at = (c * k + ky) * k;
                for (ox, patch) in rows.chunks_exact_mut(patch_len).enumerate() {
                    patch[at..at + k].copy_from_slice(&line[ox * s..ox * s + k]);
                }
            }
        }
    }
}

/// Adds the patch matrices of whole frames in `cols` (as [`im2col`] lays
/// them out) back into the frames of `grad`, `[frames, C, H, W]`: the
/// gradient of [`im2col`] (each input value receives the sum over the
/// patches that read it).
pub fn col2im_add(g: &ConvGeometry, cols: &[f32], grad: &mut [f32]) {
    let (k, s, w) = (g.kernel, g.stride, g.width);
    let (ho, wo) = g.out_hw();
    let (frame_len, patch_len) = (g.frame_len(), g.patch_len());
    let plane = g.height * w;
    for (frame, cols) in grad
        .chunks_exact_mut(frame_len)
        .zip(cols.chunks_exact(ho * wo * patch_len))
    {
        for oy in 0..ho {
            let rows = &cols[oy * wo * patch_len..(oy + 1) * wo * patch_len];
            for c in 0..g.in_channels {
                for ky in 0..k {
                    let line = &mut frame[c * plane + (oy * s + ky) * w..][..w];
                    let at = (c * k + ky) * k;
                    for (ox, patch) in rows.chunks_exact(patch_len).enumerate() {
                        for (d, x) in line[ox * s..ox * s + k].iter_mut().zip(&patch[at..at + k]) {
                            *d += x;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[C, H, W]` frames whose every value is distinct.
    fn frames(n: usize, g: &ConvGeometry) -> Vec<f32> {
        (0..n * g.frame_len()).map(|i| i as f32).collect()
    }

    #[test]
    fn a_patch_row_holds_its_window_in_weight_order() {
        // Two frames [2, 5, 7], kernel 3 stride 2: Ho 2, Wo 3.
        let g = ConvGeometry::new([2, 5, 7], 4, 3, 2).unwrap();
        assert_eq!(g.out_hw(), (2, 3));
        let x = frames(2, &g);
        let mut cols = vec![0f32; 2 * g.positions() * g.patch_len()];
        im2col(&g, Frames::F32(&x), 0, 4, &mut cols, &mut Vec::new());
        for f in 0..2 {
            for (p, row) in cols[f * 6 * 18..(f + 1) * 6 * 18]
                .chunks_exact(18)
                .enumerate()
            {
                let (oy, ox) = (p / 3, p % 3);
                for c in 0..2 {
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let want = x[f * 70 + c * 35 + (oy * 2 + ky) * 7 + ox * 2 + kx];
                            assert_eq!(row[(c * 3 + ky) * 3 + kx], want, "f{f} p{p} c{c}");
                        }
                    }
                }
            }
        }
    }

    /// Any range of lines is the same block of the whole batch's patch
    /// matrix, also when it starts or ends inside a frame, u8 or f32.
    #[test]
    fn a_range_of_lines_is_a_block_of_the_whole_matrix() {
        let g = ConvGeometry::new([2, 11, 10], 3, 4, 2).unwrap();
        let (ho, wo) = g.out_hw();
        let line_len = wo * g.patch_len();
        let bytes: Vec<u8> = (0..3 * g.frame_len())
            .map(|i| (i * 7 % 256) as u8)
            .collect();
        let floats = frames(3, &g);
        for frames in [Frames::U8(&bytes, 0.25), Frames::F32(&floats)] {
            let mut whole = vec![0f32; 3 * ho * line_len];
            im2col(&g, frames, 0, 3 * ho, &mut whole, &mut Vec::new());
            for (first, lines) in [(0, 1), (2, 5), (ho - 1, 2), (ho + 1, 2 * ho - 1)] {
                let mut part = vec![f32::NAN; lines * line_len];
                im2col(&g, frames, first, lines, &mut part, &mut Vec::new());
                assert_eq!(
                    part,
                    whole[first * line_len..(first + lines) * line_len],
                    "lines {first}+{lines}"
                );
            }
        }
    }

    #[test]
    fn u8_frames_are_scaled_on_the_way_in() {
        let g = ConvGeometry::new([1, 3, 3], 1, 3, 1).unwrap();
        let bytes: Vec<u8> = (0..9).map(|i| i * 30).collect();
        let mut cols = vec![0f32; 9];
        im2col(
            &g,
            Frames::U8(&bytes, 0.5),
            0,
            1,
            &mut cols,
            &mut Vec::new(),
        );
        let want: Vec<f32> = bytes.iter().map(|&b| f32::from(b) * 0.5).collect();
        assert_eq!(cols, want);
    }

    /// `col2im_add` is the adjoint of `im2col`: `<im2col(x), y> = <x,
    /// col2im(y)>` for any `x`, `y` (so it is im2col's gradient).
    #[test]
    fn col2im_is_the_adjoint_of_im2col() {
        for (shape, kernel, stride) in [([3, 7, 9], 3, 1), ([2, 11, 10], 4, 3), ([1, 8, 8], 8, 4)] {
            let g = ConvGeometry::new(shape, 2, kernel, stride).unwrap();
            let x: Vec<f32> = (0..2 * g.frame_len())
                .map(|i| ((i * 37) % 11) as f32 - 5.0)
                .collect();
            let n = 2 * g.positions() * g.patch_len();
            let y: Vec<f32> = (0..n).map(|i| ((i * 13) % 7) as f32 - 3.0).collect();
            let mut cols = vec![0f32; n];
            im2col(
                &g,
                Frames::F32(&x),
                0,
                2 * g.out_hw().0,
                &mut cols,
                &mut Vec::new(),
            );
            let mut back = vec![0f32; x.len()];
            col2im_add(&g, &y, &mut back);
            let lhs: f64 = cols.iter().zip(&y).map(|(a, b)| f64::from(a * b)).sum();
            let rhs: f64 = x.iter().zip(&back).map(|(a, b)| f64::from(a * b)).sum();
            assert_eq!(lhs, rhs, "{shape:?} k{kernel} s{stride}");
        }
    }

    #[test]
    fn a_kernel_larger_than_the_frame_is_refused() {
        let e = ConvGeometry::new([1, 2, 5], 4, 3, 1).unwrap_err();
        assert!(e.contains("does not fit"), "{e}");
    }
}
