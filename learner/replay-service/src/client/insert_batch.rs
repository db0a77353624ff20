//! [`InsertBatch`]: `rows` items to insert, one contiguous little-endian
//! block per field (`[rows, ...shape]`), plus optional priorities and
//! policy versions.
//!
//! Typed adders (`f32`, `u64`, ...) encode once into the block; `raw`
//! takes bytes already in wire form (a numpy buffer, a received batch);
//! `variable` a variable-length field's values and `rows + 1` offsets.
//! Each adder checks that the data is `rows * prod(shape)` elements, so a
//! batch that cannot be right is refused before it is sent; whether it
//! matches the table is the server's check. Cost: one copy of the values.
use bytes::Bytes;
use seed_replay::DType;

use crate::error::ClientError;
use crate::pb::{FieldBlock, InsertRequest};
use crate::wire_dtype;

/// A batch of items for [`crate::client::ReplayClient::insert`].
#[derive(Debug, Clone, Default)]
pub struct InsertBatch {
    rows: u32,
    fields: Vec<FieldBlock>,
    priorities: Vec<f32>,
    policy_versions: Vec<u64>,
}

macro_rules! typed_adder {
    ($fn:ident, $t:ty, $dt:expr) => {
        #[doc = concat!("Adds a `", stringify!($t), "` field; `shape` is one item's.")]
        pub fn $fn(self, name: &str, shape: &[usize], values: &[$t]) -> Result<Self, ClientError> {
            let mut bytes = Vec::with_capacity(std::mem::size_of_val(values));
            for v in values {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            self.raw(name, $dt, shape, Bytes::from(bytes))
        }
    };
}

impl InsertBatch {
    /// An empty batch of `rows` items; add every field of the table.
    pub fn new(rows: u32) -> Self {
        InsertBatch {
            rows,
            ..InsertBatch::default()
        }
    }

    pub fn rows(&self) -> u32 {
        self.rows
    }

    typed_adder!(f32, f32, DType::F32);
    typed_adder!(f64, f64, DType::F64);
    typed_adder!(i32, i32, DType::I32);
    typed_adder!(u32, u32, DType::U32);
    typed_adder!(i64, i64, DType::I64);
    typed_adder!(u64, u64, DType::U64);
    typed_adder!(u8, u8, DType::U8);

    /// Adds a field from little-endian bytes of `dtype`.
    pub fn raw(
        mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        data: Bytes,
    ) -> Result<Self, ClientError> {
        let err = |reason: String| ClientError::Batch {
            field: name.to_owned(),
            reason,
        };
        let elements = shape
            .iter()
            .try_fold(self.rows as usize, |n, &d| n.checked_mul(d))
            .ok_or_else(|| err(format!("shape {shape:?} overflows")))?;
        let expected = elements.saturating_mul(dtype.size());
        if data.len() != expected {
            return Err(err(format!(
                "{} bytes, {} rows of {shape:?} {} need {expected}",
                data.len(),
                self.rows,
                wire_dtype::name(dtype)
            )));
        }
        let shape = shape
            .iter()
            .map(|&d| u32::try_from(d).map_err(|_| err(format!("dimension {d} exceeds u32"))))
            .collect::<Result<Vec<u32>, _>>()?;
        self.fields.push(FieldBlock {
            name: name.to_owned(),
            dtype: wire_dtype::to_wire(dtype) as i32,
            shape,
            data,
            offsets: Vec::new(),
        });
        Ok(self)
    }

    /// Adds a variable-length field from little-endian bytes of `dtype`:
    /// `shape` is the dimensions before the variable last one (`&[]` for
    /// a list), `offsets` has `rows + 1` entries from 0 (row `i` holds
    /// `offsets[i + 1] - offsets[i]` elements of the last dimension), and
    /// `data` the rows one after another. Checked here as far as the batch
    /// alone can say (the table's `max_len` is the server's check).
    pub fn variable(
        mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        data: Bytes,
        offsets: Vec<u64>,
    ) -> Result<Self, ClientError> {
        let err = |reason: String| ClientError::Batch {
            field: name.to_owned(),
            reason,
        };
        let rows = self.rows as usize;
        if offsets.len() != rows + 1 || offsets.first() != Some(&0) {
            return Err(err(format!(
                "{} offsets for {rows} rows: give rows + 1, from 0",
                offsets.len()
            )));
        }
        if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
            return Err(err(format!(
                "offsets[{}] is {}, after {}: offsets go backwards",
                i + 1,
                offsets[i + 1],
                offsets[i]
            )));
        }
        let unit = shape
            .iter()
            .try_fold(dtype.size(), |n, &d| n.checked_mul(d))
            .ok_or_else(|| err(format!("shape {shape:?} overflows")))?;
        let total = offsets[rows];
        let expected = usize::try_from(total)
            .ok()
            .and_then(|t| t.checked_mul(unit));
        if expected != Some(data.len()) {
            return Err(err(format!(
                "{} bytes, but the offsets end at {total} elements of {shape:?} {}",
                data.len(),
                wire_dtype::name(dtype)
            )));
        }
        let shape = shape
            .iter()
            .map(|&d| u32::try_from(d).map_err(|_| err(format!("dimension {d} exceeds u32"))))
            .collect::<Result<Vec<u32>, _>>()?;
        self.fields.push(FieldBlock {
            name: name.to_owned(),
            dtype: wire_dtype::to_wire(dtype) as i32,
            shape,
            data,
            offsets,
        });
        Ok(self)
    }

    /// One priority per row (prioritized tables).
    pub fn priorities(mut self, priorities: Vec<f32>) -> Result<Self, ClientError> {
        if priorities.len() != self.rows as usize {
            return Err(ClientError::Batch {
                field: "priorities".into(),
                reason: format!("{} values for {} rows", priorities.len(), self.rows),
            });
        }
        self.priorities = priorities;
        Ok(self)
    }

    /// One policy version per row, stored as the table's policy-version
    /// field (leave that field out of the batch).
    pub fn policy_versions(mut self, versions: Vec<u64>) -> Result<Self, ClientError> {
        if versions.len() != self.rows as usize {
            return Err(ClientError::Batch {
                field: "policy_versions".into(),
                reason: format!("{} values for {} rows", versions.len(), self.rows),
            });
        }
        self.policy_versions = versions;
        Ok(self)
    }

    pub(crate) fn into_request(self, table: &str) -> InsertRequest {
        InsertRequest {
            table: table.to_owned(),
            rows: self.rows,
            fields: self.fields,
            priorities: self.priorities,
            policy_versions: self.policy_versions,
        }
    }
}
