//! [`DType`]: the element type of a field, and its size.
//!
//! Why its own file: the layout, the errors that name a wrong dtype, the
//! items and the batches all use it, and it uses nothing, so it sits at the
//! bottom of the crate (the errors would otherwise import the layout, which
//! imports the errors). Cost: none; a `match` per size lookup.
use serde::{Deserialize, Serialize};

/// Element type of a field. Bools are stored as one byte, 0 or 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    U8,
    Bool,
    U32,
    I32,
    F32,
    U64,
    I64,
    F64,
}

impl DType {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::U8 | DType::Bool => 1,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }
}
