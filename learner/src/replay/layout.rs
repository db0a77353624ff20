//! Item layout: the named fields of one item, each with a dtype and a fixed
//! shape, declared once.
//!
//! Why: a fixed layout lets storage preallocate one column per field and turn
//! a sample into a gather of rows into a contiguous `[B, ...shape]` buffer per
//! field. An unroll of `T+1` steps is just fields with a leading `T+1`.
//! Cost: building a layout is a few small allocations; checking an item
//! against it compares dtypes and shapes, no data is touched.
use serde::{Deserialize, Serialize};

use super::error::ReplayError;

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

/// One named field: dtype and the fixed shape of a single item (no batch dim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldSpec {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
}

impl FieldSpec {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Shape of one item's value; `[]` is a scalar.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// Elements in one item's value.
    pub fn num_elements(&self) -> usize {
        self.shape.iter().product()
    }
    /// Bytes in one item's value.
    pub fn num_bytes(&self) -> usize {
        self.num_elements() * self.dtype.size()
    }
    /// 64-bit words one row occupies in storage (rows are word aligned).
    pub(crate) fn row_words(&self) -> usize {
        self.num_bytes().div_ceil(8)
    }
}

/// The fields of an item, in declaration order. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemLayout {
    fields: Vec<FieldSpec>,
    /// Index of the `U64` scalar field holding the producing policy version.
    policy_version_field: Option<usize>,
}

impl ItemLayout {
    /// Starts a layout; add fields in the order they should be stored.
    pub fn builder() -> ItemLayoutBuilder {
        ItemLayoutBuilder::default()
    }
    pub fn fields(&self) -> &[FieldSpec] {
        &self.fields
    }
    /// Index and spec of the field called `name`.
    pub fn field(&self, name: &str) -> Option<(usize, &FieldSpec)> {
        self.fields.iter().enumerate().find(|(_, f)| f.name == name)
    }
    /// Index of the field that carries the policy version, if declared.
    pub fn policy_version_field(&self) -> Option<usize> {
        self.policy_version_field
    }
    /// Bytes of one whole item.
    pub fn item_bytes(&self) -> usize {
        self.fields.iter().map(FieldSpec::num_bytes).sum()
    }
}

/// Builds an [`ItemLayout`]; `build` checks it.
#[derive(Debug, Default, Clone)]
pub struct ItemLayoutBuilder {
    fields: Vec<FieldSpec>,
    policy_version: Option<String>,
}

impl ItemLayoutBuilder {
    /// Adds a field with the shape of one item (`&[]` for a scalar).
    pub fn field(mut self, name: &str, dtype: DType, shape: &[usize]) -> Self {
        self.fields.push(FieldSpec {
            name: name.to_owned(),
            dtype,
            shape: shape.to_vec(),
        });
        self
    }

    /// Names a `U64` scalar field whose value is the policy version that
    /// produced the item; the policy-lag cap reads it.
    pub fn policy_version_field(mut self, name: &str) -> Self {
        self.policy_version = Some(name.to_owned());
        self
    }

    /// Checks names are non-empty and unique, shapes non-empty, and the
    /// policy-version field (if any) is a `U64` scalar.
    pub fn build(self) -> Result<ItemLayout, ReplayError> {
        if self.fields.is_empty() {
            return Err(ReplayError::config("layout has no fields"));
        }
        for (i, f) in self.fields.iter().enumerate() {
            if f.name.is_empty() {
                return Err(ReplayError::config(format!("field {i} has an empty name")));
            }
            if self.fields[..i].iter().any(|g| g.name == f.name) {
                return Err(ReplayError::config(format!(
                    "field `{}` declared twice",
                    f.name
                )));
            }
            if f.num_elements() == 0 {
                return Err(ReplayError::config(format!(
                    "field `{}` has zero elements (shape {:?})",
                    f.name, f.shape
                )));
            }
        }
        let policy_version_field = match self.policy_version {
            None => None,
            Some(name) => {
                let Some(i) = self.fields.iter().position(|f| f.name == name) else {
                    return Err(ReplayError::config(format!(
                        "policy-version field `{name}` is not declared"
                    )));
                };
                let f = &self.fields[i];
                if f.dtype != DType::U64 || !f.shape.is_empty() {
                    return Err(ReplayError::config(format!(
                        "policy-version field `{name}` must be a U64 scalar, is {:?} {:?}",
                        f.dtype, f.shape
                    )));
                }
                Some(i)
            }
        };
        Ok(ItemLayout {
            fields: self.fields,
            policy_version_field,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_duplicates_empty_and_bad_policy_field() {
        assert!(ItemLayout::builder().build().is_err());
        let dup = ItemLayout::builder()
            .field("a", DType::F32, &[2])
            .field("a", DType::U8, &[1])
            .build();
        assert!(matches!(dup, Err(ReplayError::Config { .. })));
        let zero = ItemLayout::builder().field("a", DType::F32, &[0]).build();
        assert!(zero.is_err());
        let pv = ItemLayout::builder()
            .field("v", DType::U32, &[])
            .policy_version_field("v")
            .build();
        assert!(pv.is_err());
    }

    #[test]
    fn sizes_and_lookup() {
        let l = ItemLayout::builder()
            .field("obs", DType::F32, &[21, 4])
            .field("done", DType::U8, &[21])
            .field("v", DType::U64, &[])
            .policy_version_field("v")
            .build()
            .unwrap();
        assert_eq!(l.item_bytes(), 21 * 4 * 4 + 21 + 8);
        assert_eq!(
            l.field("done").map(|(i, f)| (i, f.row_words())),
            Some((1, 3))
        );
        assert_eq!(l.policy_version_field(), Some(2));
    }
}
