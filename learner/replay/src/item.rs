//! Items to insert: borrowed typed field values ([`FieldRef`]) for the hot
//! path, and an owned, named [`Item`] that a refused insert hands back.
//!
//! Why typed slices: the dtype is checked by the slice type itself and no
//! `unsafe` cast from `&[f32]` to bytes is needed; raw little-endian bytes (as
//! observations arrive off the wire) are accepted too via [`Values::Raw`].
//! Cost: values are packed into 64-bit words while being copied into the
//! slot, one pass over the data.
use crate::dtype::DType;
use crate::error::ReplayError;
use crate::layout::{FieldSpec, ItemLayout, MAX_VARIABLE_LEN};

/// Borrowed values of one field (or of `rows` stacked items of one field).
#[derive(Debug, Clone, Copy)]
pub enum Values<'a> {
    U8(&'a [u8]),
    Bool(&'a [bool]),
    U32(&'a [u32]),
    I32(&'a [i32]),
    F32(&'a [f32]),
    U64(&'a [u64]),
    I64(&'a [i64]),
    F64(&'a [f64]),
    /// Native-endian bytes of `dtype` elements.
    Raw {
        dtype: DType,
        bytes: &'a [u8],
    },
}

impl Values<'_> {
    pub fn dtype(&self) -> DType {
        match self {
            Values::U8(_) => DType::U8,
            Values::Bool(_) => DType::Bool,
            Values::U32(_) => DType::U32,
            Values::I32(_) => DType::I32,
            Values::F32(_) => DType::F32,
            Values::U64(_) => DType::U64,
            Values::I64(_) => DType::I64,
            Values::F64(_) => DType::F64,
            Values::Raw { dtype, .. } => *dtype,
        }
    }

    /// Bytes the values occupy.
    pub fn num_bytes(&self) -> usize {
        match self {
            Values::U8(v) => v.len(),
            Values::Bool(v) => v.len(),
            Values::U32(v) => v.len() * 4,
            Values::I32(v) => v.len() * 4,
            Values::F32(v) => v.len() * 4,
            Values::U64(v) => v.len() * 8,
            Values::I64(v) => v.len() * 8,
            Values::F64(v) => v.len() * 8,
            Values::Raw { bytes, .. } => bytes.len(),
        }
    }

    /// Calls `sink` with consecutive native-endian 64-bit words covering
    /// bytes `[start, start + len)` of the values; the last word is zero
    /// padded. `start` is a multiple of the element size (a row boundary).
    #[inline]
    pub(crate) fn for_each_word(&self, start: usize, len: usize, sink: impl FnMut(u64)) {
        match self {
            Values::U8(v) => pack(&v[start..start + len], |x| [x], sink),
            Values::Bool(v) => pack(&v[start..start + len], |x| [u8::from(x)], sink),
            Values::U32(v) => pack(&v[start / 4..(start + len) / 4], u32::to_ne_bytes, sink),
            Values::I32(v) => pack(&v[start / 4..(start + len) / 4], i32::to_ne_bytes, sink),
            Values::F32(v) => pack(&v[start / 4..(start + len) / 4], f32::to_ne_bytes, sink),
            Values::U64(v) => pack(&v[start / 8..(start + len) / 8], u64::to_ne_bytes, sink),
            Values::I64(v) => pack(&v[start / 8..(start + len) / 8], i64::to_ne_bytes, sink),
            Values::F64(v) => pack(&v[start / 8..(start + len) / 8], f64::to_ne_bytes, sink),
            Values::Raw { bytes, .. } => pack_bytes(&bytes[start..start + len], sink),
        }
    }
}

/// [`pack`] for bytes: eight at a time into a word. `pack` with one-byte
/// elements assembles each word byte by byte, which showed as most of a
/// batched insert's per-item cost from Python (raw bytes are what the
/// Python package and the replay service insert).
#[inline(always)]
fn pack_bytes(bytes: &[u8], mut sink: impl FnMut(u64)) {
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        sink(u64::from_ne_bytes(word));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        sink(u64::from_ne_bytes(word));
    }
}

/// Packs elements of `S` bytes into words. `S` divides 8.
#[inline(always)]
fn pack<T: Copy, const S: usize>(
    xs: &[T],
    to_bytes: impl Fn(T) -> [u8; S],
    mut sink: impl FnMut(u64),
) {
    let per_word = 8 / S;
    let mut chunks = xs.chunks_exact(per_word);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        for (j, &x) in chunk.iter().enumerate() {
            word[j * S..(j + 1) * S].copy_from_slice(&to_bytes(x));
        }
        sink(u64::from_ne_bytes(word));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        for (j, &x) in rest.iter().enumerate() {
            word[j * S..(j + 1) * S].copy_from_slice(&to_bytes(x));
        }
        sink(u64::from_ne_bytes(word));
    }
}

/// One field of an item to insert, in layout order: its shape and values.
/// For a batch insert of `rows` items the shape is `[rows, ...field shape]`.
///
/// A variable-length field also has `offsets`: `rows + 1` of them (2 for a
/// single item), from 0, not decreasing; row `i` holds `offsets[i + 1] -
/// offsets[i]` elements of the last dimension, and `values` the rows one
/// after another without padding (`offsets[rows]` elements of the last
/// dimension in all). Its `shape` has no last dimension (`[rows]` for a
/// batch of token lists).
#[derive(Debug, Clone, Copy)]
pub struct FieldRef<'a> {
    pub shape: &'a [usize],
    pub values: Values<'a>,
    /// Variable-length fields only.
    pub offsets: Option<&'a [u64]>,
}

impl<'a> FieldRef<'a> {
    /// A fixed-shape field.
    pub fn new(shape: &'a [usize], values: Values<'a>) -> Self {
        FieldRef {
            shape,
            values,
            offsets: None,
        }
    }

    /// A variable-length field: `values` of rows delimited by `offsets`.
    pub fn variable(shape: &'a [usize], values: Values<'a>, offsets: &'a [u64]) -> Self {
        FieldRef {
            shape,
            values,
            offsets: Some(offsets),
        }
    }

    /// Elements of the last dimension row `row` holds (a variable-length
    /// field whose offsets were checked).
    #[inline]
    pub(crate) fn row_len(&self, row: usize) -> u64 {
        match self.offsets {
            Some(o) => o.get(row + 1).copied().unwrap_or(0) - o.get(row).copied().unwrap_or(0),
            None => 0,
        }
    }

    /// Element of the last dimension row `row` starts at (checked offsets).
    #[inline]
    pub(crate) fn row_start(&self, row: usize) -> u64 {
        self.offsets.and_then(|o| o.get(row).copied()).unwrap_or(0)
    }
}

/// Checks `fields` (layout order) against `layout` for `rows` stacked items
/// (`rows == None`: one item, shapes without a batch dim).
pub(crate) fn check_fields(
    layout: &ItemLayout,
    fields: &[FieldRef<'_>],
    rows: Option<usize>,
) -> Result<(), ReplayError> {
    if fields.len() != layout.fields().len() {
        return Err(ReplayError::FieldCount {
            expected: layout.fields().len(),
            got: fields.len(),
        });
    }
    for (spec, f) in layout.fields().iter().zip(fields) {
        check_field(spec, f, rows)?;
    }
    Ok(())
}

fn check_field(spec: &FieldSpec, f: &FieldRef<'_>, rows: Option<usize>) -> Result<(), ReplayError> {
    let offsets_error = |row: Option<usize>, reason: String| ReplayError::Offsets {
        field: spec.name().to_owned(),
        row,
        reason,
    };
    if f.values.dtype() != spec.dtype() {
        return Err(ReplayError::DType {
            field: spec.name().to_owned(),
            expected: spec.dtype(),
            got: f.values.dtype(),
        });
    }
    let shape_ok = match rows {
        None => f.shape == spec.shape(),
        Some(r) => f.shape.first() == Some(&r) && &f.shape[1..] == spec.shape(),
    };
    if !shape_ok {
        let mut expected = spec.shape().to_vec();
        if let Some(r) = rows {
            expected.insert(0, r);
        }
        return Err(ReplayError::Shape {
            field: spec.name().to_owned(),
            expected,
            got: f.shape.to_vec(),
        });
    }
    let n = rows.unwrap_or(1);
    let expected = match (spec.variable(), f.offsets) {
        (None, None) => spec.num_bytes() * n,
        (None, Some(_)) => {
            return Err(offsets_error(
                None,
                "offsets given for a fixed-shape field".to_owned(),
            ))
        }
        (Some(_), None) => {
            return Err(offsets_error(
                None,
                "a variable-length field needs offsets (rows + 1 of them)".to_owned(),
            ))
        }
        (Some(v), Some(offsets)) => check_offsets(spec, v, offsets, f, n)?,
    };
    if f.values.num_bytes() != expected {
        return Err(ReplayError::DataLength {
            field: spec.name().to_owned(),
            expected,
            got: f.values.num_bytes(),
        });
    }
    Ok(())
}

/// A variable-length field's offsets against its values and `max_len`;
/// returns the values' bytes. Out of line: a fixed-shape field's check
/// stays as small as it was.
#[inline(never)]
fn check_offsets(
    spec: &FieldSpec,
    v: crate::layout::VariableLength,
    offsets: &[u64],
    f: &FieldRef<'_>,
    n: usize,
) -> Result<usize, ReplayError> {
    let offsets_error = |row: Option<usize>, reason: String| ReplayError::Offsets {
        field: spec.name().to_owned(),
        row,
        reason,
    };
    if offsets.len() != n + 1 {
        return Err(offsets_error(
            None,
            format!("{} offsets for {n} rows (needs {})", offsets.len(), n + 1),
        ));
    }
    if offsets[0] != 0 {
        return Err(offsets_error(
            Some(0),
            format!("offsets start at {}, not 0", offsets[0]),
        ));
    }
    let max_len = v.max_len.unwrap_or(MAX_VARIABLE_LEN).min(MAX_VARIABLE_LEN);
    for (row, pair) in offsets.windows(2).enumerate() {
        if pair[1] < pair[0] {
            return Err(offsets_error(
                Some(row),
                format!("offsets go backwards ({} then {})", pair[0], pair[1]),
            ));
        }
        let len = pair[1] - pair[0];
        if len > max_len {
            return Err(offsets_error(
                Some(row),
                format!("{len} elements, max_len is {max_len}"),
            ));
        }
    }
    let last = offsets[n];
    let Some(bytes) = usize::try_from(last)
        .ok()
        .and_then(|l| l.checked_mul(spec.num_bytes()))
    else {
        return Err(offsets_error(
            Some(n.saturating_sub(1)),
            format!("offsets end at {last} elements, more than memory holds"),
        ));
    };
    if f.values.num_bytes() != bytes {
        return Err(offsets_error(
            Some(n.saturating_sub(1)),
            format!(
                "offsets end at {last} elements ({bytes} bytes), the values are {} bytes",
                f.values.num_bytes()
            ),
        ));
    }
    Ok(bytes)
}

/// An owned field: name, dtype, shape and native-endian bytes (a
/// variable-length field: its offsets too, `[0, len]`).
#[derive(Debug, Clone, PartialEq)]
pub struct ItemField {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
    /// Variable-length fields only.
    pub offsets: Option<Vec<u64>>,
}

/// An owned item with named fields, in any order. Convenient, and what a
/// refused insert hands back; the hot path is [`FieldRef`] slices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Item {
    pub fields: Vec<ItemField>,
}

macro_rules! typed_with {
    ($fn:ident, $t:ty, $dt:expr) => {
        #[doc = concat!("Adds a `", stringify!($t), "` field.")]
        pub fn $fn(self, name: &str, shape: &[usize], values: &[$t]) -> Self {
            let mut bytes = Vec::with_capacity(values.len() * std::mem::size_of::<$t>());
            for v in values {
                bytes.extend_from_slice(&v.to_ne_bytes());
            }
            self.with_bytes(name, $dt, shape, bytes)
        }
    };
}

impl Item {
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a field from native-endian bytes.
    pub fn with_bytes(mut self, name: &str, dtype: DType, shape: &[usize], bytes: Vec<u8>) -> Self {
        self.fields.push(ItemField {
            name: name.to_owned(),
            dtype,
            shape: shape.to_vec(),
            bytes,
            offsets: None,
        });
        self
    }

    /// Adds a variable-length field from native-endian bytes: `shape` is
    /// the dimensions before the variable last one (`&[]` for a list), and
    /// the bytes hold whole elements of that last dimension.
    pub fn with_variable_bytes(
        mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        bytes: Vec<u8>,
    ) -> Self {
        let unit = shape.iter().product::<usize>() * dtype.size();
        let len = bytes.len().checked_div(unit).unwrap_or(0) as u64;
        self.fields.push(ItemField {
            name: name.to_owned(),
            dtype,
            shape: shape.to_vec(),
            bytes,
            offsets: Some(vec![0, len]),
        });
        self
    }
    typed_with!(with_u8, u8, DType::U8);
    typed_with!(with_u32, u32, DType::U32);
    typed_with!(with_i32, i32, DType::I32);
    typed_with!(with_f32, f32, DType::F32);
    typed_with!(with_u64, u64, DType::U64);
    typed_with!(with_i64, i64, DType::I64);
    typed_with!(with_f64, f64, DType::F64);

    /// Borrowed fields in `layout` order; errors name a missing field.
    pub fn to_refs<'a>(&'a self, layout: &ItemLayout) -> Result<Vec<FieldRef<'a>>, ReplayError> {
        if self.fields.len() != layout.fields().len() {
            return Err(ReplayError::FieldCount {
                expected: layout.fields().len(),
                got: self.fields.len(),
            });
        }
        layout
            .fields()
            .iter()
            .map(|spec| {
                let f = self
                    .fields
                    .iter()
                    .find(|f| f.name == spec.name())
                    .ok_or_else(|| ReplayError::MissingField {
                        field: spec.name().to_owned(),
                    })?;
                Ok(FieldRef {
                    shape: &f.shape,
                    values: Values::Raw {
                        dtype: f.dtype,
                        bytes: &f.bytes,
                    },
                    offsets: f.offsets.as_deref(),
                })
            })
            .collect()
    }

    /// The layout this item implies (fields in the item's order); used by
    /// the lazy buffer.
    pub fn layout(&self) -> Result<ItemLayout, ReplayError> {
        self.layout_with_policy_version(None)
    }

    /// [`layout`](Self::layout), naming `policy_version` (if any) as the
    /// layout's policy-version field.
    pub(crate) fn layout_with_policy_version(
        &self,
        policy_version: Option<&str>,
    ) -> Result<ItemLayout, ReplayError> {
        let mut b = ItemLayout::builder();
        for f in &self.fields {
            b = match f.offsets {
                None => b.field(&f.name, f.dtype, &f.shape),
                Some(_) => b.variable_field(&f.name, f.dtype, &f.shape, None),
            };
        }
        if let Some(name) = policy_version {
            b = b.policy_version_field(name);
        }
        b.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_words_with_padding() {
        let mut words = Vec::new();
        Values::F32(&[1.0, 2.0, 3.0]).for_each_word(0, 12, |w| words.push(w));
        assert_eq!(words.len(), 2);
        let b = words[1].to_ne_bytes();
        assert_eq!(f32::from_ne_bytes([b[0], b[1], b[2], b[3]]), 3.0);
        assert_eq!(&b[4..], &[0, 0, 0, 0]);
        let mut n = 0;
        Values::U8(&[7; 21]).for_each_word(0, 21, |_| n += 1);
        assert_eq!(n, 3);
    }

    #[test]
    fn raw_bytes_pack_as_their_typed_values() {
        // 5 f32: two whole words and a padded half word, read from an
        // offset as the per-item loop does.
        let floats = [1.5f32, -2.0, 3.25, 4.0, 5.5, 6.0, 7.0];
        let bytes: Vec<u8> = floats.iter().flat_map(|f| f.to_ne_bytes()).collect();
        let (mut typed, mut raw) = (Vec::new(), Vec::new());
        Values::F32(&floats).for_each_word(8, 20, |w| typed.push(w));
        Values::Raw {
            dtype: DType::F32,
            bytes: &bytes,
        }
        .for_each_word(8, 20, |w| raw.push(w));
        assert_eq!(typed.len(), 3);
        assert_eq!(raw, typed);
        let mut odd = Vec::new();
        Values::Raw {
            dtype: DType::U8,
            bytes: &[1, 2, 3],
        }
        .for_each_word(0, 3, |w| odd.push(w));
        assert_eq!(odd, vec![u64::from_ne_bytes([1, 2, 3, 0, 0, 0, 0, 0])]);
    }

    #[test]
    fn checks_dtype_shape_and_length() {
        let layout = ItemLayout::builder()
            .field("x", DType::F32, &[2, 2])
            .build()
            .unwrap();
        let good = [FieldRef::new(&[2, 2], Values::F32(&[0.0; 4]))];
        assert!(check_fields(&layout, &good, None).is_ok());
        let bad_dtype = [FieldRef::new(&[2, 2], Values::U8(&[0; 4]))];
        assert!(matches!(
            check_fields(&layout, &bad_dtype, None),
            Err(ReplayError::DType { .. })
        ));
        let bad_shape = [FieldRef::new(&[4], Values::F32(&[0.0; 4]))];
        assert!(matches!(
            check_fields(&layout, &bad_shape, None),
            Err(ReplayError::Shape { .. })
        ));
        let bad_len = [FieldRef::new(&[2, 2], Values::F32(&[0.0; 3]))];
        assert!(matches!(
            check_fields(&layout, &bad_len, None),
            Err(ReplayError::DataLength { .. })
        ));
        let batch = [FieldRef::new(&[3, 2, 2], Values::F32(&[0.0; 12]))];
        assert!(check_fields(&layout, &batch, Some(3)).is_ok());
    }
}
