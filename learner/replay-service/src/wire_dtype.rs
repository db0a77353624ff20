//! The wire's `FieldDtype` and the buffer's [`DType`], both ways.
//!
//! Why its own file: the server checks incoming blocks against the table's
//! dtypes, the info reply and the client both describe fields with it, and
//! the names in error messages (`f32`, `u64`) are the ones the config file
//! uses. Each mapping is written once, as a `match` ([`to_wire`],
//! [`name`]); reading back ([`from_wire`], [`parse`]) searches [`ALL`] for
//! the dtype that maps to the value. Cost: a `match`, or up to eight of
//! them.
use seed_replay::DType;

use crate::pb::FieldDtype;

/// Every dtype, in the order error messages list them. A new `DType`
/// variant fails the matches below until it is mapped; add it here too.
pub const ALL: [DType; 8] = [
    DType::U8,
    DType::Bool,
    DType::U32,
    DType::I32,
    DType::F32,
    DType::U64,
    DType::I64,
    DType::F64,
];

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
    ALL.into_iter().find(|&d| to_wire(d) as i32 == value)
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

/// The dtype a config file names (`"f32"`, `"u8"`, ...; `None`: no such
/// name).
pub fn parse(name_in_config: &str) -> Option<DType> {
    ALL.into_iter().find(|&d| name(d) == name_in_config)
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
        for d in ALL {
            assert_eq!(from_wire(to_wire(d) as i32), Some(d));
            assert_eq!(parse(name(d)), Some(d));
        }
        assert_eq!(from_wire(0), None);
        assert_eq!(from_wire(99), None);
        assert_eq!(wire_name(99), "unknown (99)");
        assert_eq!(parse("f16"), None);
    }
}
