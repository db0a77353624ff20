//! [`array`]: a new numpy array holding a copy of native-endian bytes, of
//! a table's dtype and a given shape. What a sampled batch from an
//! in-process table becomes, a fixed-shape block received from a server,
//! and a variable-length block whose bytes are not aligned for a view
//! (`shared_bytes`).
//!
//! Cost: one allocation and one `memcpy` of the bytes.
use numpy::{Element, IxDyn, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use seed_replay::DType;

fn filled<'py, T: Element>(py: Python<'py>, shape: &[usize], bytes: &[u8]) -> Bound<'py, PyAny> {
    // SAFETY: `new` returns a C-contiguous array of `shape` whose memory
    // is uninitialised; it is written whole right here (`bytes` is exactly
    // its size, checked by the caller and asserted below) before any
    // Python code can see it.
    let array = unsafe { PyArrayDyn::<T>::new(py, IxDyn(shape), false) };
    assert_eq!(array.len() * std::mem::size_of::<T>(), bytes.len());
    // SAFETY: `data` points at the array's `bytes.len()` bytes (above),
    // which do not overlap `bytes` (a fresh allocation).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), array.data().cast::<u8>(), bytes.len());
    }
    array.into_any()
}

/// A new array of `dtype` shaped `shape` holding a copy of `bytes`, whose
/// length must be the shape's (callers check it; a mismatch panics).
pub fn array<'py>(
    py: Python<'py>,
    dtype: DType,
    shape: &[usize],
    bytes: &[u8],
) -> Bound<'py, PyAny> {
    match dtype {
        DType::U8 => filled::<u8>(py, shape, bytes),
        // Stored bools are numpy's (0 or 1 bytes): copied as they are.
        DType::Bool => filled::<bool>(py, shape, bytes),
        DType::U32 => filled::<u32>(py, shape, bytes),
        DType::I32 => filled::<i32>(py, shape, bytes),
        DType::F32 => filled::<f32>(py, shape, bytes),
        DType::U64 => filled::<u64>(py, shape, bytes),
        DType::I64 => filled::<i64>(py, shape, bytes),
        DType::F64 => filled::<f64>(py, shape, bytes),
    }
}
