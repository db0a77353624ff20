//! The wire's `FieldDtype` and the buffer's [`DType`], both ways.
//!
//! Why its own file: the server checks incoming blocks against the table's
//! dtypes, the info reply and the client both describe fields with it, and
//! the names in error messages (`f32`, `u64`) are the ones the config file
//! uses. Cost: a `match`.
use seed_replay::DType;

use crate::pb::FieldDtype;

/// The wire enum of a buffer dtype.
pub fn to_wire(dtype: DType) -> FieldDtype {
    match dtype {
        DType::U8 => FieldDtype::U8,
        DType::Bool => FieldDtype::Bool,
        DType::U32 => FieldDtype::U32,
        DType::I32 => FieldDtype::I32,
        DType::F32 => FieldDtype::F32,
        DType::U64 => FieldDtype::U64,
        DType::I64 => FieldDtype::I64,
        DType::F64 => FieldDtype::F64,
    }
}

/// The buffer dtype of a wire value (`None`: unspecified or unknown).
pub fn from_wire(value: i32) -> Option<DType> {
    match FieldDtype::try_from(value).ok()? {
        FieldDtype::Unspecified => None,
        FieldDtype::U8 => Some(DType::U8),
        FieldDtype::Bool => Some(DType::Bool),
        FieldDtype::U32 => Some(DType::U32),
        FieldDtype::I32 => Some(DType::I32),
        FieldDtype::F32 => Some(DType::F32),
        FieldDtype::U64 => Some(DType::U64),
        FieldDtype::I64 => Some(DType::I64),
        FieldDtype::F64 => Some(DType::F64),
    }
}

/// The dtype's name as the config file spells it.
pub fn name(dtype: DType) -> &'static str {
    match dtype {
        DType::U8 => "u8",
        DType::Bool => "bool",
        DType::U32 => "u32",
        DType::I32 => "i32",
        DType::F32 => "f32",
        DType::U64 => "u64",
        DType::I64 => "i64",
        DType::F64 => "f64",
    }
}

/// A wire dtype value's name for error messages, known or not.
pub fn wire_name(value: i32) -> String {
    match from_wire(value) {
        Some(d) => name(d).to_owned(),
        None if value == 0 => "unspecified".to_owned(),
        None => format!("unknown ({value})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_and_unspecified_is_none() {
        for d in [
            DType::U8,
            DType::Bool,
            DType::U32,
            DType::I32,
            DType::F32,
            DType::U64,
            DType::I64,
            DType::F64,
        ] {
            assert_eq!(from_wire(to_wire(d) as i32), Some(d));
        }
        assert_eq!(from_wire(0), None);
        assert_eq!(from_wire(99), None);
        assert_eq!(wire_name(99), "unknown (99)");
    }
}
