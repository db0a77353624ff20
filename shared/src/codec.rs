//! Observation bytes on the wire: one little-endian buffer per step batch.
//!
//! Encoding a batch is one `extend` per env (or one copy for u8 frames) and
//! decoding writes straight into the caller's preallocated row, so nothing is
//! encoded per float by protobuf and nothing is allocated per element.

use bytes::{BufMut, BytesMut};

/// Appends f32 observations to `out` as little-endian bytes.
pub fn put_f32_le(out: &mut BytesMut, values: &[f32]) {
    out.reserve(values.len() * 4);
    for &v in values {
        out.put_f32_le(v);
    }
}

/// Decodes little-endian f32 bytes into `out`; `bytes.len()` must be `4 * out.len()`.
///
/// # Panics
/// If the lengths disagree; callers validate lengths against the spec first.
pub fn read_f32_le_into(bytes: &[u8], out: &mut [f32]) {
    assert_eq!(bytes.len(), out.len() * 4, "f32 byte length mismatch");
    for (dst, src) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *dst = f32::from_le_bytes([src[0], src[1], src[2], src[3]]);
    }
}

/// Widens u8 observations into f32 (values kept as 0..=255; the model scales them).
pub fn widen_u8_into(bytes: &[u8], out: &mut [f32]) {
    assert_eq!(bytes.len(), out.len(), "u8 byte length mismatch");
    for (dst, &src) in out.iter_mut().zip(bytes) {
        *dst = src as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn f32_round_trips_bit_exact(values in proptest::collection::vec(any::<f32>(), 0..64)) {
            let mut buf = BytesMut::new();
            put_f32_le(&mut buf, &values);
            prop_assert_eq!(buf.len(), values.len() * 4);
            let mut back = vec![0f32; values.len()];
            read_f32_le_into(&buf, &mut back);
            for (a, b) in values.iter().zip(&back) {
                prop_assert_eq!(a.to_bits(), b.to_bits());
            }
        }
    }

    #[test]
    fn bytes_are_little_endian() {
        let mut buf = BytesMut::new();
        put_f32_le(&mut buf, &[1.0]);
        assert_eq!(&buf[..], &1.0f32.to_le_bytes());
        assert_eq!(&buf[..], &[0, 0, 0x80, 0x3f]);
    }

    #[test]
    fn u8_widens_exactly() {
        let mut out = [0f32; 3];
        widen_u8_into(&[0, 7, 255], &mut out);
        assert_eq!(out, [0.0, 7.0, 255.0]);
    }
}
