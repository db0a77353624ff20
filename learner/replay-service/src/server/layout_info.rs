//! A table's item layout as an `Info` reply describes it: per field a
//! `FieldInfo` (name, wire dtype, shape; a variable-length field's
//! `variable_length` and `max_len`), and the policy-version field by name.
//!
//! Why its own file: plain, sharded and grouped tables all answer `Info`
//! with their layout, and a mirror rebuilds the layout from exactly these
//! values (`server/mirror.rs`), so they must be written one way. Cost: one
//! allocation per field, per `Info` call.
use seed_replay::ItemLayout;

use crate::config::step_layout::StepLayout;
use crate::pb::FieldInfo;
use crate::wire_dtype;

/// Each field of `layout`, in layout order.
pub(crate) fn field_infos(layout: &ItemLayout) -> Vec<FieldInfo> {
    layout
        .fields()
        .iter()
        .map(|f| FieldInfo {
            name: f.name().to_owned(),
            dtype: wire_dtype::to_wire(f.dtype()) as i32,
            shape: f.shape().iter().map(|&d| d as u32).collect(),
            variable_length: f.is_variable(),
            max_len: f.variable().and_then(|v| v.max_len).unwrap_or(0),
        })
        .collect()
}

/// Each field of a grouped table's step `layout`, in layout order: a
/// variable-length field's `shape` holds the dimensions before its
/// variable one.
pub(crate) fn step_field_infos(layout: &StepLayout) -> Vec<FieldInfo> {
    let mut infos = field_infos(layout.units());
    for (info, (_, variable)) in infos.iter_mut().zip(layout.fields()) {
        if let Some(v) = variable {
            info.variable_length = true;
            info.max_len = v.max_len.unwrap_or(0);
        }
    }
    infos
}

/// The name of `layout`'s policy-version field (empty: it has none).
pub(crate) fn policy_version_field(layout: &ItemLayout) -> String {
    layout
        .policy_version_field()
        .map(|i| layout.fields()[i].name().to_owned())
        .unwrap_or_default()
}
