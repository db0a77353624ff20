//! A variable-length field as Python gets it: `(values, offsets)`, the
//! values a numpy array *over the received bytes* (no copy), the offsets
//! an `int64` array of `rows + 1` numbers.
//!
//! Why: a token field is most of what a fetched group or a sampled batch of
//! an LLM table carries (56k tokens a group in the pool benchmark); copying
//! it into a fresh array was one more pass over all of it per call. The
//! message's bytes (`bytes::Bytes`, reference-counted) are kept alive by a
//! small Python object set as the array's base, so the array stays valid
//! however long Python holds it, and the message's memory goes when the
//! last array over it does.
//!
//! The view is read-only: the bytes are shared (other fields of the same
//! message, and `Bytes` is immutable to Rust), so numpy's `WRITEABLE` flag
//! is cleared; `values.copy()` gives a writable array. A view needs the
//! values aligned for their dtype: protobuf places a field's bytes at any
//! offset of the message, so where they are not (an `int32` field at an
//! odd offset), the values are copied once into a new, writable array, as
//! fixed-shape fields always are. Cost: a Python object and an array
//! header per field; one copy only when misaligned.
use bytes::Bytes;
use numpy::ndarray::ArrayView1;
use numpy::npyffi::flags::NPY_ARRAY_WRITEABLE;
use numpy::prelude::*;
use numpy::{Element, PyArray1};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use seed_replay::DType;
use seed_replay_service::pb::FieldBlock;
use seed_replay_service::wire_dtype;

use crate::replay::array_copy;
use crate::replay::error::protocol_error;

/// Keeps the bytes under a numpy view alive (the view's base object).
#[pyclass(frozen, module = "seed_rs._native")]
pub struct SharedBytes {
    _bytes: Bytes,
}

/// A read-only 1-D array of `T` over `bytes` (whose length is a multiple
/// of `T`'s size), or a copy when they are not aligned for `T`.
fn view<'py, T: Element>(
    py: Python<'py>,
    dtype: DType,
    bytes: Bytes,
) -> PyResult<Bound<'py, PyAny>> {
    let len = bytes.len() / std::mem::size_of::<T>();
    let ptr = bytes.as_ptr();
    if len == 0 || ptr.align_offset(std::mem::align_of::<T>()) != 0 {
        return Ok(array_copy::array(py, dtype, &[len], &bytes));
    }
    // SAFETY: `ptr` is non-null and aligned for `T` (checked above) and
    // points at `len * size_of::<T>()` initialised bytes that `bytes`
    // owns; every bit pattern is a valid `T` for the plain numbers numpy
    // stores (bools are 0 or 1 bytes, checked by the server when they were
    // written, and numpy reads any byte as a bool anyway).
    let values = unsafe { ArrayView1::<T>::from_shape_ptr(len, ptr.cast::<T>()) };
    let owner = Bound::new(
        py,
        SharedBytes {
            _bytes: bytes.clone(),
        },
    )?
    .into_any();
    // SAFETY: `owner` holds a clone of `bytes` (one reference-counted
    // buffer, never reallocated or written) and becomes the array's base
    // object, which numpy keeps alive as long as the array.
    let array = unsafe { PyArray1::<T>::borrow_from_array(&values, owner) };
    // SAFETY: the array was just made and no other reference to it exists;
    // clearing `WRITEABLE` keeps Python from writing into shared bytes.
    unsafe {
        (*array.as_array_ptr()).fields.flags &= !NPY_ARRAY_WRITEABLE;
    }
    Ok(array.into_any())
}

/// A 1-D array of `dtype` over `bytes` (module docs).
pub fn values_array(py: Python<'_>, dtype: DType, bytes: Bytes) -> PyResult<Bound<'_, PyAny>> {
    match dtype {
        DType::U8 => view::<u8>(py, dtype, bytes),
        DType::Bool => view::<bool>(py, dtype, bytes),
        DType::U32 => view::<u32>(py, dtype, bytes),
        DType::I32 => view::<i32>(py, dtype, bytes),
        DType::F32 => view::<f32>(py, dtype, bytes),
        DType::U64 => view::<u64>(py, dtype, bytes),
        DType::I64 => view::<i64>(py, dtype, bytes),
        DType::F64 => view::<f64>(py, dtype, bytes),
    }
}

/// `offsets` as an `int64` array that owns them (the conversion reuses the
/// vector's memory: `u64` and `i64` have one layout; offsets never reach
/// 2^63, the server's checks keep them far below).
pub fn offsets_array(py: Python<'_>, offsets: Vec<u64>) -> Bound<'_, PyAny> {
    let offsets: Vec<i64> = offsets.into_iter().map(|o| o as i64).collect();
    PyArray1::from_vec(py, offsets).into_any()
}

/// A received variable-length block of `rows` rows as `(values, offsets)`,
/// checked first (outside data: `rows + 1` offsets from 0, never going
/// back, ending at the values' length), else a protocol error naming the
/// field.
pub fn variable_pair<'py>(
    py: Python<'py>,
    rows: usize,
    block: &FieldBlock,
) -> PyResult<Bound<'py, PyTuple>> {
    let bad = |why: String| protocol_error(py, format!("field `{}`: {why}", block.name));
    let dtype = wire_dtype::from_wire(block.dtype)
        .ok_or_else(|| bad(format!("dtype {}", wire_dtype::wire_name(block.dtype))))?;
    let unit = block
        .shape
        .iter()
        .try_fold(dtype.size(), |n, &d| n.checked_mul(d as usize));
    let offsets = &block.offsets;
    let total = offsets.last().copied().unwrap_or(0);
    let bytes = usize::try_from(total)
        .ok()
        .zip(unit)
        .and_then(|(t, u)| t.checked_mul(u));
    if offsets.len() != rows + 1
        || offsets[0] != 0
        || offsets.windows(2).any(|w| w[1] < w[0])
        || bytes != Some(block.data.len())
    {
        return Err(bad(format!(
            "{} offsets ending at {total} for {rows} rows and {} bytes",
            offsets.len(),
            block.data.len()
        )));
    }
    let values = values_array(py, dtype, block.data.clone())?;
    let offsets = offsets_array(py, offsets.clone());
    PyTuple::new(py, [values, offsets])
}
