//! Arrays in and out of a table, shared by the in-process buffer and the
//! remote handle so that both accept and refuse exactly the same input.
//!
//! In: a dict `{field: array}` is checked against the table's
//! [`TableLayout`] before anything is stored or sent ([`check_fields`]):
//! every field present and no other, each of exactly the table's dtype
//! (native little-endian, no implicit casts), shaped `[rows, *field_shape]`
//! with the same `rows` for all, C-contiguous. A wrong one is a
//! `ValueError` naming the field; something that is not an array at all a
//! `TypeError`. "Array" means a numpy array, or anything numpy can view
//! without a copy: an object with `__dlpack__` (a torch tensor on the CPU,
//! a JAX array) through `numpy.from_dlpack`, or one with the buffer
//! protocol (`bytes`, `memoryview`, `array.array`) through a `memoryview`.
//! The item bytes are then read in place ([`array_bytes`]): the in-process
//! buffer copies them once, into its slots; the remote handle once, into
//! the message.
//!
//! Out: each field of a sampled batch becomes a new C-contiguous, writable
//! numpy array that owns its memory (`PyArray::new`, then one memcpy),
//! shaped `[rows, *field_shape]` of the table's dtype.
//!
//! Why numpy's C API (the `numpy` crate) rather than `numpy.frombuffer`:
//! creating an array that way is a function call into numpy, not a Python
//! call with argument parsing, and reading an input array's dtype, shape
//! and data pointer is a struct read. Per sampled field that saves about a
//! microsecond, which is most of what a small `sample` costs.
use bytes::Bytes;
use numpy::prelude::*;
use numpy::{PyArray1, PyArrayDescr, PyUntypedArray};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyDict, PyTuple};
use seed_replay::DType;
use seed_replay_service::pb::{FieldBlock, SampleReply};
use seed_replay_service::{wire_dtype, InsertBatch};

pub use crate::replay::array_copy::array;
use crate::replay::error::protocol_error;
use crate::replay::layout::{numpy_name, FieldLayout, TableLayout};
use crate::replay::shared_bytes;

static FROM_DLPACK: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static ASCONTIGUOUSARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn numpy_function<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyAny>>,
    name: &str,
) -> PyResult<&'py Bound<'py, PyAny>> {
    Ok(cell
        .get_or_try_init(py, || {
            PyResult::Ok(py.import("numpy")?.getattr(name)?.unbind())
        })?
        .bind(py))
}

/// numpy's dtype object for a buffer dtype (native byte order, which is
/// little-endian on every platform the wheel is built for).
fn numpy_dtype(py: Python<'_>, d: DType) -> Bound<'_, PyArrayDescr> {
    match d {
        DType::U8 => numpy::dtype::<u8>(py),
        DType::Bool => numpy::dtype::<bool>(py),
        DType::U32 => numpy::dtype::<u32>(py),
        DType::I32 => numpy::dtype::<i32>(py),
        DType::F32 => numpy::dtype::<f32>(py),
        DType::U64 => numpy::dtype::<u64>(py),
        DType::I64 => numpy::dtype::<i64>(py),
        DType::F64 => numpy::dtype::<f64>(py),
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

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".into())
}

/// `value` as a numpy array without copying it: itself, `numpy.from_dlpack`
/// of a `__dlpack__` producer, or a view of a buffer-protocol object.
/// Anything else is a `TypeError` naming `what`.
pub fn as_array<'py>(
    value: &Bound<'py, PyAny>,
    what: impl FnOnce() -> String,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    if let Ok(array) = value.cast::<PyUntypedArray>() {
        return Ok(array.clone());
    }
    let py = value.py();
    let viewed = if value.hasattr("__dlpack__")? {
        Some(numpy_function(py, &FROM_DLPACK, "from_dlpack")?.call1((value,))?)
    } else if let Ok(view) = py
        .import("builtins")?
        .getattr("memoryview")?
        .call1((value,))
    {
        Some(numpy_function(py, &ASARRAY, "asarray")?.call1((view,))?)
    } else {
        None
    };
    match viewed {
        Some(array) => Ok(array.cast_into::<PyUntypedArray>()?),
        None => Err(PyTypeError::new_err(format!(
            "{}: expected an array (numpy, or anything with `__dlpack__` or the buffer \
             protocol), got {}",
            what(),
            type_name(value)
        ))),
    }
}

/// The bytes of a C-contiguous `array` (the caller checked that), read in
/// place.
pub fn array_bytes<'a>(array: &'a Bound<'_, PyUntypedArray>) -> &'a [u8] {
    let len = array.len() * array.dtype().itemsize();
    if len == 0 {
        return &[];
    }
    // SAFETY: the array is C-contiguous (checked by the callers, see
    // `check_fields`), so its `len` bytes start at `data` and are
    // initialised numpy memory. The slice borrows `array`, whose reference
    // keeps the array (and its base, which owns the memory) alive, and
    // numpy refuses to resize an array that has other references, so the
    // memory is not freed or moved while the slice lives. Reads happen
    // with the GIL held (every caller holds a `Bound`); another thread
    // writing the same array between bytecodes could at worst change what
    // is read, never where.
    unsafe {
        let data = (*array.as_array_ptr()).fields.data as *const u8;
        std::slice::from_raw_parts(data, len)
    }
}

/// A checked `fields` dict: the arrays in layout order (skipping the
/// policy-version field when `policy_versions` replaces it) with the row
/// count they share.
pub struct CheckedFields<'py> {
    pub rows: usize,
    /// `(layout index, array)`.
    pub arrays: Vec<(usize, Bound<'py, PyUntypedArray>)>,
    /// `(layout index, value)` of the variable-length fields, not yet
    /// read ([`variable_field`] reads them).
    pub variable: Vec<(usize, Bound<'py, PyAny>)>,
}

/// Each key of `fields` names a field of `layout` (and not the
/// policy-version field when `policy_versions` replaces it), else the
/// `ValueError` or `TypeError` naming the first that does not.
fn check_keys(
    table: &str,
    layout: &TableLayout,
    fields: &Bound<'_, PyDict>,
    pv_given: bool,
) -> PyResult<()> {
    let pv_field = layout.policy_version_field.as_deref();
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
        if pv_given && Some(name.as_str()) == pv_field {
            return Err(PyValueError::new_err(format!(
                "field `{name}`: leave the policy-version field out when `policy_versions` is given"
            )));
        }
    }
    Ok(())
}

/// Checks `fields` against `layout` (module docs). `pv_given`: the caller
/// passes `policy_versions`, so the table's policy-version field must be
/// left out.
pub fn check_fields<'py>(
    table: &str,
    layout: &TableLayout,
    fields: &Bound<'py, PyDict>,
    pv_given: bool,
) -> PyResult<CheckedFields<'py>> {
    let py = fields.py();
    let pv_field = layout.policy_version_field.as_deref();
    let expected = layout.fields.len() - usize::from(pv_given && pv_field.is_some());
    // The usual case costs one lookup per field: with exactly as many keys
    // as expected fields and each expected one found below, there is no
    // other. Otherwise the keys are named one by one first, so an unknown
    // or misplaced field is reported as such rather than as a missing one.
    if fields.len() != expected {
        check_keys(table, layout, fields, pv_given)?;
    }
    let mut rows: Option<(usize, &str)> = None;
    let mut arrays = Vec::with_capacity(layout.fields.len());
    let mut variable = Vec::new();
    for (index, spec) in layout.fields.iter().enumerate() {
        if pv_given && Some(spec.name.as_str()) == pv_field {
            continue;
        }
        let name = spec.name.as_str();
        let Some(value) = fields.get_item(layout.py_names(py)[index].bind(py))? else {
            check_keys(table, layout, fields, pv_given)?;
            return Err(PyValueError::new_err(format!(
                "field `{name}` is missing (table `{table}` needs {})",
                layout.names()
            )));
        };
        if spec.variable.is_some() {
            variable.push((index, value));
            continue;
        }
        let bad = |reason: String| PyValueError::new_err(format!("field `{name}`: {reason}"));
        let array = as_array(&value, || format!("field `{name}`"))?;
        let dtype = array.dtype();
        if !dtype.is_equiv_to(&numpy_dtype(py, spec.dtype)) {
            let got: String = dtype.getattr("name")?.extract()?;
            let got = if got == numpy_name(spec.dtype) {
                let text: String = dtype.getattr("str")?.extract()?;
                format!("{got} ({text}, not little-endian)")
            } else {
                got
            };
            return Err(bad(format!(
                "dtype {got}, the table stores {} (no implicit casts: use .astype(numpy.{}))",
                numpy_name(spec.dtype),
                numpy_name(spec.dtype)
            )));
        }
        let shape = array.shape();
        if shape.len() != spec.shape.len() + 1 || shape[1..] != spec.shape[..] {
            let mut want = vec!["rows".to_owned()];
            want.extend(spec.shape.iter().map(usize::to_string));
            let want = match want.len() {
                1 => "(rows,)".to_owned(),
                _ => format!("({})", want.join(", ")),
            };
            return Err(bad(format!(
                "shape {}, expected {want} (one item is {})",
                shape_text(shape),
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
        if !array.is_c_contiguous() {
            return Err(bad(
                "not C-contiguous (numpy.ascontiguousarray makes a contiguous copy)".into(),
            ));
        }
        arrays.push((index, array));
    }
    let rows = match (rows, variable.first()) {
        (Some((rows, _)), _) => rows,
        // Only variable-length fields: the first one's rows count.
        (None, Some((_, value))) => variable_rows(value)?,
        (None, None) => return Err(PyValueError::new_err("no fields given")),
    };
    if rows == 0 {
        return Err(PyValueError::new_err("the arrays have 0 rows"));
    }
    u32::try_from(rows)
        .map_err(|_| PyValueError::new_err(format!("{rows} rows exceed 4294967295")))?;
    Ok(CheckedFields {
        rows,
        arrays,
        variable,
    })
}

/// The rows of a variable-length field's value: a `(values, offsets)`
/// pair has `len(offsets) - 1`, a list of arrays its length.
fn variable_rows(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    if let Ok(pair) = value.cast::<PyTuple>() {
        if pair.len() == 2 {
            return Ok(pair.get_item(1)?.len()?.saturating_sub(1));
        }
    }
    value.len()
}

/// A variable-length field's value (a list of one array per row, or a
/// `(values, offsets)` pair) as its bytes and `rows + 1` offsets: one copy
/// of the values; each array of exactly the table's dtype, contiguous, of
/// the field's fixed dimensions then its own length. The offsets' order
/// and bounds are the table's check.
pub fn variable_field(
    spec: &FieldLayout,
    value: &Bound<'_, PyAny>,
    rows: usize,
) -> PyResult<(Bytes, Vec<u64>)> {
    let name = spec.name.as_str();
    let py = value.py();
    let want = numpy_name(spec.dtype);
    let exact = |array: &Bound<'_, numpy::PyUntypedArray>, what: &str| -> PyResult<()> {
        let got: String = array.dtype().getattr("name")?.extract()?;
        if got != want || !array.dtype().is_native_byteorder().unwrap_or(true) {
            return Err(PyValueError::new_err(format!(
                "field `{name}`{what}: dtype {got}, the table stores {want} (no implicit \
                 casts: use .astype(numpy.{want}))"
            )));
        }
        if !array.is_c_contiguous() {
            return Err(PyValueError::new_err(format!(
                "field `{name}`{what}: not C-contiguous (numpy.ascontiguousarray makes a \
                 contiguous copy)"
            )));
        }
        Ok(())
    };
    if let Ok(pair) = value.cast::<PyTuple>() {
        if pair.len() != 2 {
            return Err(PyValueError::new_err(format!(
                "field `{name}`: a tuple of {} items; a variable-length field takes \
                 (values, offsets) or a list of one array per step",
                pair.len()
            )));
        }
        let values = as_array(&pair.get_item(0)?, || format!("field `{name}` values"))?;
        exact(&values, " values")?;
        let offsets = u64s_signed(
            &pair.get_item(1)?,
            &format!("fields[\"{name}\"] offsets"),
            rows + 1,
        )?;
        return Ok((Bytes::copy_from_slice(array_bytes(&values)), offsets));
    }
    let list = value.len().map_err(|_| {
        PyTypeError::new_err(format!(
            "field `{name}`: variable-length, so a list of one array per step or a \
             (values, offsets) pair; got {}",
            value
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    if list != rows {
        return Err(PyValueError::new_err(format!(
            "field `{name}`: {list} rows, the other fields have {rows}"
        )));
    }
    let mut data = Vec::new();
    let mut offsets = Vec::with_capacity(rows + 1);
    offsets.push(0u64);
    let mut at = 0u64;
    for (i, item) in value.try_iter()?.enumerate() {
        let item = item?;
        let array = match item.cast::<numpy::PyUntypedArray>() {
            Ok(a) => a.clone(),
            Err(_) if item.hasattr("__dlpack__")? => {
                as_array(&item, || format!("field `{name}`[{i}]"))?
            }
            Err(_) => py
                .import("numpy")?
                .getattr("asarray")?
                .call1((&item, want))
                .map_err(|e| PyValueError::new_err(format!("field `{name}`[{i}]: {e}")))?
                .cast_into::<numpy::PyUntypedArray>()?,
        };
        exact(&array, &format!("[{i}]"))?;
        let shape = array.shape();
        let fixed_ok =
            shape.len() == spec.shape.len() + 1 && shape[..spec.shape.len()] == spec.shape[..];
        if !fixed_ok {
            return Err(PyValueError::new_err(format!(
                "field `{name}`[{i}]: shape {shape:?}, one step is {:?} then its variable length",
                spec.shape
            )));
        }
        data.extend_from_slice(array_bytes(&array));
        at += shape[spec.shape.len()] as u64;
        offsets.push(at);
    }
    Ok((Bytes::from(data), offsets))
}

/// The remote handle's batch of checked `fields`: one copy of each
/// field's bytes into the message.
pub fn insert_batch(
    table: &str,
    layout: &TableLayout,
    fields: &Bound<'_, PyDict>,
    priorities: Option<&Bound<'_, PyAny>>,
    policy_versions: Option<&Bound<'_, PyAny>>,
) -> PyResult<InsertBatch> {
    let checked = check_fields(table, layout, fields, policy_versions.is_some())?;
    let rows = checked.rows;
    let mut batch = InsertBatch::new(rows as u32);
    for (index, array) in &checked.arrays {
        let spec = &layout.fields[*index];
        batch = batch
            .raw(
                &spec.name,
                spec.dtype,
                &spec.shape,
                Bytes::copy_from_slice(array_bytes(array)),
            )
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    for (index, value) in &checked.variable {
        let spec = &layout.fields[*index];
        let (data, offsets) = variable_field(spec, value, rows)?;
        batch = batch
            .variable(&spec.name, spec.dtype, &spec.shape, data, offsets)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    if let Some(p) = priorities {
        batch = batch
            .priorities(self::priorities(p, rows)?)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    if let Some(v) = policy_versions {
        batch = batch
            .policy_versions(self::policy_versions(v, rows)?)
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
    u64s(value, "keys", n)
}

/// `policy_versions` for `rows` rows.
pub fn policy_versions(value: &Bound<'_, PyAny>, rows: usize) -> PyResult<Vec<u64>> {
    u64s(value, "policy_versions", rows)
}

/// `what` (one per row) as `u64`s.
pub fn u64s(value: &Bound<'_, PyAny>, what: &str, rows: usize) -> PyResult<Vec<u64>> {
    Ok(vector(value, what, "<u8", rows)?
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

/// `what` (`len` integers, none negative) as `u64`s: offsets, which
/// numpy gives as `int64`.
pub fn u64s_signed(value: &Bound<'_, PyAny>, what: &str, len: usize) -> PyResult<Vec<u64>> {
    vector(value, what, "<i8", len)?
        .chunks_exact(8)
        .enumerate()
        .map(|(i, c)| {
            let v = i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            u64::try_from(v).map_err(|_| {
                PyValueError::new_err(format!("`{what}`: element {i} is {v}, negative"))
            })
        })
        .collect()
}

/// `priorities` for `rows` items as `f32`s, each finite and not negative
/// (else a `ValueError` naming `priorities` and the first bad element:
/// the same on both sides, before anything is stored or sent).
pub fn priorities(value: &Bound<'_, PyAny>, rows: usize) -> PyResult<Vec<f32>> {
    let values: Vec<f32> = vector(value, "priorities", "<f4", rows)?
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if let Some((i, p)) = values
        .iter()
        .enumerate()
        .find(|(_, p)| !(p.is_finite() && **p >= 0.0))
    {
        return Err(PyValueError::new_err(format!(
            "`priorities`: element {i} is {p}; a priority must be finite and not negative"
        )));
    }
    Ok(values)
}

/// The bytes of a one-dimensional `value` of `len` elements converted to
/// `dtype` (`numpy.ascontiguousarray`: a cast where needed, as for any
/// numpy argument; these are per-row numbers, not item data).
fn vector(value: &Bound<'_, PyAny>, what: &str, dtype: &str, len: usize) -> PyResult<Vec<u8>> {
    let py = value.py();
    let array = numpy_function(py, &ASCONTIGUOUSARRAY, "ascontiguousarray")?
        .call((value,), Some(&[("dtype", dtype)].into_py_dict(py)?))
        .map_err(|e| PyValueError::new_err(format!("`{what}`: {e}")))?;
    let array = array.cast_into::<PyUntypedArray>()?;
    if array.shape() != [len] {
        return Err(PyValueError::new_err(format!(
            "`{what}`: shape {}, expected ({len},)",
            shape_text(array.shape())
        )));
    }
    Ok(array_bytes(&array).to_vec())
}

/// A `uint64` array of the keys `first..first + count`.
pub fn key_range_array(py: Python<'_>, first: u64, count: usize) -> Bound<'_, PyAny> {
    PyArray1::from_iter(py, first..first + count as u64).into_any()
}

/// A `uint64` array of `values`.
pub fn u64_array<'py>(py: Python<'py>, values: &[u64]) -> Bound<'py, PyAny> {
    PyArray1::from_slice(py, values).into_any()
}

/// A `float32` array of `values`.
pub fn f32_array<'py>(py: Python<'py>, values: &[f32]) -> Bound<'py, PyAny> {
    PyArray1::from_slice(py, values).into_any()
}

/// A remote sample reply as `(fields, keys, weights)`.
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
    let keys = u64_array(py, &reply.keys);
    let weights = f32_array(py, &reply.weights);
    PyTuple::new(py, [fields.into_any(), keys, weights])
}

/// Received field blocks as `{name: array [rows, *shape]}`, a
/// variable-length field's as `(values, offsets)` (`shared_bytes`).
pub fn fields_dict<'py>(
    py: Python<'py>,
    rows: usize,
    blocks: &[FieldBlock],
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for block in blocks {
        if !block.offsets.is_empty() {
            dict.set_item(&block.name, shared_bytes::variable_pair(py, rows, block)?)?;
            continue;
        }
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
        dict.set_item(&block.name, array(py, dtype, &shape, &block.data))?;
    }
    Ok(dict)
}

/// Zeros for [`call_floor`].
static ZEROS: [u8; 1 << 16] = [0; 1 << 16];

/// `call_floor(floats)`: a new `float32` array of `floats` zeros (at most
/// 16384), made the way `sample` makes its arrays. For benchmarks: the
/// cost floor of a Python call into this extension that returns one array
/// (`benches/python/replay_bench.py` reports it beside `sample`).
#[pyfunction]
pub fn call_floor(py: Python<'_>, floats: usize) -> PyResult<Bound<'_, PyAny>> {
    let bytes = ZEROS
        .get(..floats.saturating_mul(4))
        .ok_or_else(|| PyValueError::new_err(format!("floats {floats} exceeds 16384")))?;
    Ok(array(py, DType::F32, &[floats], bytes))
}
