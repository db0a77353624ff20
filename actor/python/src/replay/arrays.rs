//! numpy arrays in and out of the replay service's field blocks.
//!
//! In: a dict `{field: ndarray}` becomes an [`InsertBatch`], checked
//! against the table's [`TableLayout`] before anything is sent: every
//! field of the table present and no other, each a C-contiguous array of
//! exactly the table's dtype (little-endian, no implicit casts) shaped
//! `[rows, *field_shape]`, the same `rows` for all. A wrong one is a
//! `ValueError` (`TypeError` for something that is not an array) that
//! names the field. Out: each received block becomes an array of the
//! table's dtype shaped `[rows, *field_shape]`, writable and owned by
//! Python.
//!
//! Cost: in, per field, one `tobytes()` (a memcpy into a `bytes`) and one
//! copy into the message; out, per field, one copy into a `bytearray`
//! that the array wraps (`numpy.frombuffer`, no further copy). Nothing is
//! converted element by element. Why not the buffer protocol: it entered
//! CPython's stable ABI in 3.11 and the wheel serves 3.9 onwards (the same
//! reason the actor uses `tobytes()`); the extra memcpy is about a
//! microsecond per 100 KB, next to tens of microseconds per call.

use std::collections::HashSet;

use bytes::Bytes;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyByteArray, PyBytes, PyDict, PyTuple, PyType};
use seed_replay::DType;
use seed_replay_service::pb::{FieldBlock, SampleReply};
use seed_replay_service::{wire_dtype, InsertBatch};

use crate::replay::error::protocol_error;
use crate::replay::layout::{numpy_name, TableLayout};

static NDARRAY: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static FROMBUFFER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static ASCONTIGUOUSARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// numpy's `dtype.str` of a buffer dtype: little-endian, as on the wire.
pub fn numpy_dtype(d: DType) -> &'static str {
    match d {
        DType::U8 => "|u1",
        DType::Bool => "|b1",
        DType::U32 => "<u4",
        DType::I32 => "<i4",
        DType::F32 => "<f4",
        DType::U64 => "<u8",
        DType::I64 => "<i8",
        DType::F64 => "<f8",
    }
}

/// `(rows, d1, d2)` as Python writes a shape.
fn shape_text(dims: &[usize]) -> String {
    match dims {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The batch of `fields` for `table`, checked against its `layout`.
/// `policy_versions` (one per row) replace the table's policy-version
/// field, which must then be left out.
pub fn insert_batch(
    table: &str,
    layout: &TableLayout,
    fields: &Bound<'_, PyDict>,
    priorities: Option<&Bound<'_, PyAny>>,
    policy_versions: Option<&Bound<'_, PyAny>>,
) -> PyResult<InsertBatch> {
    let py = fields.py();
    let pv_field = layout.policy_version_field.as_deref();
    let mut given = HashSet::with_capacity(fields.len());
    for key in fields.keys() {
        let name: String = key.extract().map_err(|_| {
            PyTypeError::new_err(format!("field names must be str, got {}", type_name(&key)))
        })?;
        if layout.field(&name).is_none() {
            return Err(PyValueError::new_err(format!(
                "field `{name}`: table `{table}` has no such field (its fields: {})",
                layout.names()
            )));
        }
        if policy_versions.is_some() && Some(name.as_str()) == pv_field {
            return Err(PyValueError::new_err(format!(
                "field `{name}`: leave the policy-version field out when `policy_versions` is given"
            )));
        }
        given.insert(name);
    }
    let ndarray = NDARRAY.import(py, "numpy", "ndarray")?;
    let mut rows: Option<(usize, &str)> = None;
    let mut blocks = Vec::with_capacity(layout.fields.len());
    for spec in &layout.fields {
        if policy_versions.is_some() && Some(spec.name.as_str()) == pv_field {
            continue;
        }
        let name = spec.name.as_str();
        let Some(value) = fields.get_item(name)? else {
            return Err(PyValueError::new_err(format!(
                "field `{name}` is missing (table `{table}` needs {})",
                layout.names()
            )));
        };
        let bad = |reason: String| PyValueError::new_err(format!("field `{name}`: {reason}"));
        if !value.is_instance(ndarray)? {
            return Err(PyTypeError::new_err(format!(
                "field `{name}`: expected a numpy array, got {}",
                type_name(&value)
            )));
        }
        let dtype = value.getattr("dtype")?;
        let dtype_str: String = dtype.getattr("str")?.extract()?;
        if dtype_str != numpy_dtype(spec.dtype) {
            let got: String = dtype.getattr("name")?.extract()?;
            let got = if got == numpy_name(spec.dtype) {
                format!("{got} ({dtype_str}, not little-endian)")
            } else {
                got
            };
            return Err(bad(format!(
                "dtype {got}, the table stores {} (no implicit casts: use .astype(numpy.{}))",
                numpy_name(spec.dtype),
                numpy_name(spec.dtype)
            )));
        }
        let shape: Vec<usize> = value.getattr("shape")?.extract()?;
        let want = || {
            let mut w = vec!["rows".to_owned()];
            w.extend(spec.shape.iter().map(usize::to_string));
            match w.len() {
                1 => "(rows,)".to_owned(),
                _ => format!("({})", w.join(", ")),
            }
        };
        if shape.len() != spec.shape.len() + 1 || shape[1..] != spec.shape[..] {
            return Err(bad(format!(
                "shape {}, expected {} (one item is {})",
                shape_text(&shape),
                want(),
                shape_text(&spec.shape)
            )));
        }
        match rows {
            None => rows = Some((shape[0], name)),
            Some((n, first)) if n != shape[0] => {
                return Err(bad(format!("{} rows, field `{first}` has {n}", shape[0])))
            }
            Some(_) => {}
        }
        let contiguous: bool = value.getattr("flags")?.getattr("c_contiguous")?.extract()?;
        if !contiguous {
            return Err(bad(
                "not C-contiguous (numpy.ascontiguousarray makes a contiguous copy)".into(),
            ));
        }
        let bytes = value.call_method0("tobytes")?;
        let bytes = bytes.cast::<PyBytes>()?;
        blocks.push((spec, Bytes::copy_from_slice(bytes.as_bytes())));
    }
    let (rows, _) = rows.ok_or_else(|| PyValueError::new_err("no fields given"))?;
    if rows == 0 {
        return Err(PyValueError::new_err("the arrays have 0 rows"));
    }
    let rows32 = u32::try_from(rows)
        .map_err(|_| PyValueError::new_err(format!("{rows} rows exceed 4294967295")))?;
    let mut batch = InsertBatch::new(rows32);
    for (spec, data) in blocks {
        batch = batch
            .raw(&spec.name, spec.dtype, &spec.shape, data)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    if let Some(p) = priorities {
        batch = batch
            .priorities(self::priorities(p, rows)?)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    if let Some(v) = policy_versions {
        let values = u64s(&vector(v, "policy_versions", "<u8", rows)?);
        batch = batch
            .policy_versions(values)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    Ok(batch)
}

/// `keys` (any integer array-like) as `u64`s.
pub fn keys(value: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let n: usize = value.len().map_err(|_| {
        PyTypeError::new_err(format!(
            "`keys`: expected an array of keys, got {}",
            type_name(value)
        ))
    })?;
    Ok(u64s(&vector(value, "keys", "<u8", n)?))
}

/// `priorities` for `rows` keys as `f32`s.
pub fn priorities(value: &Bound<'_, PyAny>, rows: usize) -> PyResult<Vec<f32>> {
    Ok(vector(value, "priorities", "<f4", rows)?
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The bytes of a one-dimensional `value` of `len` elements converted to
/// `dtype` (`numpy.ascontiguousarray`: a cast where needed, as for any
/// numpy argument; these are per-row numbers, not item data).
fn vector(value: &Bound<'_, PyAny>, what: &str, dtype: &str, len: usize) -> PyResult<Vec<u8>> {
    let py = value.py();
    let convert = ASCONTIGUOUSARRAY.get_or_try_init(py, || {
        PyResult::Ok(py.import("numpy")?.getattr("ascontiguousarray")?.unbind())
    })?;
    let array = convert
        .bind(py)
        .call((value,), Some(&[("dtype", dtype)].into_py_dict(py)?))
        .map_err(|e| PyValueError::new_err(format!("`{what}`: {e}")))?;
    let shape: Vec<usize> = array.getattr("shape")?.extract()?;
    if shape != [len] {
        return Err(PyValueError::new_err(format!(
            "`{what}`: shape {}, expected ({len},)",
            shape_text(&shape)
        )));
    }
    let bytes = array.call_method0("tobytes")?;
    Ok(bytes.cast::<PyBytes>()?.as_bytes().to_vec())
}

fn u64s(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect()
}

/// A new writable array of `dtype` shaped `shape` holding a copy of `data`
/// (whose length the caller checked).
pub fn array<'py>(
    py: Python<'py>,
    data: &[u8],
    dtype: DType,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let buffer = PyByteArray::new(py, data);
    from_buffer(py, &buffer, dtype, shape)
}

/// A `uint64` array of `values`.
pub fn u64_array<'py>(py: Python<'py>, values: &[u64]) -> PyResult<Bound<'py, PyAny>> {
    let buffer = PyByteArray::new_with(py, values.len() * 8, |buf| {
        for (chunk, v) in buf.chunks_exact_mut(8).zip(values) {
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    })?;
    from_buffer(py, &buffer, DType::U64, &[values.len()])
}

/// A `float32` array of `values`.
pub fn f32_array<'py>(py: Python<'py>, values: &[f32]) -> PyResult<Bound<'py, PyAny>> {
    let buffer = PyByteArray::new_with(py, values.len() * 4, |buf| {
        for (chunk, v) in buf.chunks_exact_mut(4).zip(values) {
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    })?;
    from_buffer(py, &buffer, DType::F32, &[values.len()])
}

fn from_buffer<'py>(
    py: Python<'py>,
    buffer: &Bound<'py, PyByteArray>,
    dtype: DType,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let frombuffer = FROMBUFFER.get_or_try_init(py, || {
        PyResult::Ok(py.import("numpy")?.getattr("frombuffer")?.unbind())
    })?;
    let flat = frombuffer.bind(py).call1((buffer, numpy_dtype(dtype)))?;
    if shape.len() == 1 {
        return Ok(flat);
    }
    flat.call_method1("reshape", (PyTuple::new(py, shape)?,))
}

/// A sample reply as `(fields, keys, weights)`.
pub fn sampled_tuple<'py>(py: Python<'py>, reply: &SampleReply) -> PyResult<Bound<'py, PyTuple>> {
    let rows = reply.rows as usize;
    if reply.keys.len() != rows || reply.weights.len() != rows {
        return Err(protocol_error(
            py,
            format!(
                "{rows} rows with {} keys and {} weights",
                reply.keys.len(),
                reply.weights.len()
            ),
        ));
    }
    let fields = fields_dict(py, rows, &reply.fields)?;
    let keys = u64_array(py, &reply.keys)?;
    let weights = f32_array(py, &reply.weights)?;
    PyTuple::new(py, [fields.into_any(), keys, weights])
}

/// A sampled batch's fields as `{name: array [rows, *shape]}`.
pub fn fields_dict<'py>(
    py: Python<'py>,
    rows: usize,
    blocks: &[FieldBlock],
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for block in blocks {
        let dtype = wire_dtype::from_wire(block.dtype).ok_or_else(|| {
            protocol_error(
                py,
                format!(
                    "field `{}`: dtype {}",
                    block.name,
                    wire_dtype::wire_name(block.dtype)
                ),
            )
        })?;
        let mut shape = Vec::with_capacity(block.shape.len() + 1);
        shape.push(rows);
        shape.extend(block.shape.iter().map(|&d| d as usize));
        let expected = shape
            .iter()
            .try_fold(dtype.size(), |n, &d| n.checked_mul(d));
        if expected != Some(block.data.len()) {
            return Err(protocol_error(
                py,
                format!(
                    "field `{}`: {} bytes for {} {}",
                    block.name,
                    block.data.len(),
                    shape_text(&shape),
                    numpy_name(dtype)
                ),
            ));
        }
        dict.set_item(&block.name, array(py, &block.data, dtype, &shape)?)?;
    }
    Ok(dict)
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".into())
}
