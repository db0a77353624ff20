//! Item layout: the named fields of one item, each with a dtype and a fixed
//! shape, or a variable last dimension, declared once.
//!
//! Why: a fixed layout lets storage preallocate one column per field and turn
//! a sample into a gather of rows into a contiguous `[B, ...shape]` buffer per
//! field. An unroll of `T+1` steps is just fields with a leading `T+1`.
//! A *variable-length* field (a token list: [`ItemLayoutBuilder::variable_field`])
//! varies in its last dimension from item to item: its `shape` holds the
//! dimensions before that one (`[]` for a list), its slot row holds where its
//! values are in the table's heap (`heap.rs`), and a batch of it is values
//! plus offsets, never padded. Its [`FieldSpec::num_bytes`] is the bytes of
//! one element of the last dimension (one token).
//! Cost: building a layout is a few small allocations; checking an item
//! against it compares dtypes and shapes, no data is touched (a variable
//! field's offsets are read once).
//!
//! Every [`ItemLayout`] and [`FieldSpec`] that exists has passed
//! `validate_fields`: the builder calls it, and deserialization (a mapped
//! directory's `layout.json`, a checkpoint's header) goes through it too
//! (`serde(try_from)`), so a damaged file gives an error, never a layout
//! whose sizes overflow or whose policy-version index points nowhere.
use serde::{Deserialize, Serialize};

use crate::dtype::DType;
use crate::error::ReplayError;

/// One named field: dtype and the fixed shape of a single item (no batch
/// dim), or, for a variable-length field, the dimensions before its
/// variable last one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "UncheckedFieldSpec")]
pub struct FieldSpec {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
    /// Absent for fixed-shape fields (and from files written before
    /// variable-length fields existed, which had none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    variable: Option<VariableLength>,
}

/// The variable last dimension of a field: each item holds as many
/// elements of it as it has (`offsets[i + 1] - offsets[i]` in a batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct VariableLength {
    /// Elements of the last dimension one item may hold at most; `None`:
    /// no bound but the storage's (`u32::MAX` elements).
    pub max_len: Option<u64>,
}

/// Elements of the variable dimension one item may hold whatever
/// `max_len` says: a heap reference keeps the count in 32 bits (`heap.rs`).
pub const MAX_VARIABLE_LEN: u64 = u32::MAX as u64;

/// Words of a variable-length field's slot row: where its values are in
/// the table's heap (`heap.rs`, `HeapRef`).
pub(crate) const VARIABLE_ROW_WORDS: usize = 2;

impl FieldSpec {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Shape of one item's value; `[]` is a scalar. A variable-length
    /// field: the dimensions before its variable last one.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// The variable last dimension, if the field has one.
    pub fn variable(&self) -> Option<VariableLength> {
        self.variable
    }
    /// Whether the field's last dimension varies from item to item.
    pub fn is_variable(&self) -> bool {
        self.variable.is_some()
    }
    /// Elements in one item's value (a variable-length field: in one
    /// element of its last dimension). Cannot overflow: every `FieldSpec`
    /// was checked by `validate_fields` before anyone could call this.
    pub fn num_elements(&self) -> usize {
        self.shape.iter().product()
    }
    /// Bytes in one item's value (a variable-length field: in one element
    /// of its last dimension, a token).
    pub fn num_bytes(&self) -> usize {
        self.num_elements() * self.dtype.size()
    }
    /// 64-bit words one row occupies in storage (rows are word aligned): a
    /// variable-length field's row is its heap reference (`heap.rs`).
    pub(crate) fn row_words(&self) -> usize {
        if self.is_variable() {
            VARIABLE_ROW_WORDS
        } else {
            self.num_bytes().div_ceil(8)
        }
    }
    /// Bytes of the row [`SampleBatch`](crate::SampleBatch) gathers per
    /// item before the heap is read: the value, or the heap reference.
    pub(crate) fn row_bytes(&self) -> usize {
        if self.is_variable() {
            VARIABLE_ROW_WORDS * 8
        } else {
            self.num_bytes()
        }
    }
}

/// The fields of an item, in declaration order. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "UncheckedItemLayout")]
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
    /// Bytes of one whole item (a variable-length field counts one
    /// element of its last dimension).
    pub fn item_bytes(&self) -> usize {
        self.fields.iter().map(FieldSpec::num_bytes).sum()
    }
    /// Whether any field is variable-length (the table then has a heap).
    pub fn has_variable(&self) -> bool {
        self.fields.iter().any(FieldSpec::is_variable)
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
            variable: None,
        });
        self
    }

    /// Adds a variable-length field: `shape` is the dimensions before the
    /// variable last one (`&[]` for a list of tokens), `max_len` bounds
    /// that last dimension per item (`None`: [`MAX_VARIABLE_LEN`]).
    pub fn variable_field(
        mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        max_len: Option<u64>,
    ) -> Self {
        self.fields.push(FieldSpec {
            name: name.to_owned(),
            dtype,
            shape: shape.to_vec(),
            variable: Some(VariableLength { max_len }),
        });
        self
    }

    /// Names a `U64` scalar field whose value is the policy version that
    /// produced the item; the policy-lag cap reads it.
    pub fn policy_version_field(mut self, name: &str) -> Self {
        self.policy_version = Some(name.to_owned());
        self
    }

    /// Checks the layout with `validate_fields`: names non-empty and
    /// unique, every field at least one element, sizes that fit a `usize`,
    /// a variable field's `max_len` in `1..=MAX_VARIABLE_LEN`, and the
    /// policy-version field (if any) declared and a `U64` scalar.
    pub fn build(self) -> Result<ItemLayout, ReplayError> {
        let policy_version_field = match self.policy_version {
            None => None,
            Some(name) => match self.fields.iter().position(|f| f.name == name) {
                Some(i) => Some(i),
                None => {
                    return Err(ReplayError::config(format!(
                        "policy-version field `{name}` is not declared"
                    )))
                }
            },
        };
        validate_fields(&self.fields, policy_version_field).map_err(ReplayError::config)?;
        Ok(ItemLayout {
            fields: self.fields,
            policy_version_field,
        })
    }
}

/// Bytes of one item's value of `f`, or why it cannot be stored: an
/// empty name, zero elements, or a size that overflows a `usize` (the
/// shape's product, times the dtype size, rounded up to whole words).
fn checked_field_bytes(f: &FieldSpec) -> Result<usize, String> {
    if f.name.is_empty() {
        return Err("a field has an empty name".to_owned());
    }
    let bytes = f
        .shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .and_then(|n| n.checked_mul(f.dtype.size()))
        // Rows are stored as whole 64-bit words.
        .filter(|b| b.checked_next_multiple_of(8).is_some())
        .ok_or_else(|| {
            format!(
                "field `{}`: shape {:?} of {:?} overflows the address space",
                f.name, f.shape, f.dtype
            )
        })?;
    if bytes == 0 {
        return Err(format!(
            "field `{}` has zero elements (shape {:?})",
            f.name, f.shape
        ));
    }
    if let Some(VariableLength { max_len: Some(m) }) = f.variable {
        if m == 0 || m > MAX_VARIABLE_LEN {
            return Err(format!(
                "field `{}`: max_len must be in 1..={MAX_VARIABLE_LEN}, is {m}",
                f.name
            ));
        }
    }
    Ok(bytes)
}

/// The one set of checks every layout passes, built or read from a file:
/// at least one field; each field as in `checked_field_bytes`; names
/// unique; the whole item's rounded-up size within `isize::MAX` (Rust's
/// allocation limit); `policy_version_field` (an index) in range and a
/// `U64` scalar. Returns what is wrong, for the caller to wrap with its
/// context (a config error, or the file it came from).
pub(crate) fn validate_fields(
    fields: &[FieldSpec],
    policy_version_field: Option<usize>,
) -> Result<(), String> {
    if fields.is_empty() {
        return Err("layout has no fields".to_owned());
    }
    let mut item_bytes = 0usize;
    for (i, f) in fields.iter().enumerate() {
        if f.name.is_empty() {
            return Err(format!("field {i} has an empty name"));
        }
        let bytes = checked_field_bytes(f)?;
        if fields[..i].iter().any(|g| g.name == f.name) {
            return Err(format!("field `{}` declared twice", f.name));
        }
        // `checked_field_bytes` made sure the rounding cannot overflow.
        let row = if f.is_variable() {
            VARIABLE_ROW_WORDS * 8
        } else {
            bytes.next_multiple_of(8)
        };
        item_bytes = item_bytes
            .checked_add(row)
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| "the item's fields together overflow the address space".to_owned())?;
    }
    if let Some(i) = policy_version_field {
        let Some(f) = fields.get(i) else {
            return Err(format!(
                "policy-version field index {i} is out of range ({} fields)",
                fields.len()
            ));
        };
        if f.dtype != DType::U64 || !f.shape.is_empty() || f.is_variable() {
            return Err(format!(
                "policy-version field `{}` must be a U64 scalar, is {:?} {:?}",
                f.name, f.dtype, f.shape
            ));
        }
    }
    Ok(())
}

/// A [`FieldSpec`] as read from a file, before [`checked_field_bytes`].
#[derive(Deserialize)]
struct UncheckedFieldSpec {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
    #[serde(default)]
    variable: Option<VariableLength>,
}

impl TryFrom<UncheckedFieldSpec> for FieldSpec {
    type Error = String;
    fn try_from(u: UncheckedFieldSpec) -> Result<Self, String> {
        let f = FieldSpec {
            name: u.name,
            dtype: u.dtype,
            shape: u.shape,
            variable: u.variable,
        };
        checked_field_bytes(&f)?;
        Ok(f)
    }
}

/// An [`ItemLayout`] as read from a file, before `validate_fields`.
#[derive(Deserialize)]
struct UncheckedItemLayout {
    fields: Vec<FieldSpec>,
    policy_version_field: Option<usize>,
}

impl TryFrom<UncheckedItemLayout> for ItemLayout {
    type Error = String;
    fn try_from(u: UncheckedItemLayout) -> Result<Self, String> {
        validate_fields(&u.fields, u.policy_version_field)?;
        Ok(ItemLayout {
            fields: u.fields,
            policy_version_field: u.policy_version_field,
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

    /// A layout read from a file goes through the builder's checks: each
    /// of these parsed into a layout before, and the bad index or the
    /// wrapped size then panicked or misaddressed the storage.
    #[test]
    fn deserialized_layouts_pass_the_builders_checks() {
        let good = r#"{"fields":[{"name":"x","dtype":"F32","shape":[3]},
            {"name":"v","dtype":"U64","shape":[]}],"policy_version_field":1}"#;
        let layout: ItemLayout = serde_json::from_str(good).expect("valid layout");
        assert_eq!(layout.policy_version_field(), Some(1));
        let field = |name: &str, dtype: &str, shape: &str| {
            format!(r#"{{"name":"{name}","dtype":"{dtype}","shape":{shape}}}"#)
        };
        let with = |fields: &[String], pv: &str| {
            format!(
                r#"{{"fields":[{}],"policy_version_field":{pv}}}"#,
                fields.join(",")
            )
        };
        let x = field("x", "F32", "[3]");
        let cases = [
            (
                "policy-version field index 5",
                with(std::slice::from_ref(&x), "5"),
            ),
            ("must be a U64 scalar", with(std::slice::from_ref(&x), "0")),
            (
                "declared twice",
                with(&[x.clone(), field("x", "U8", "[1]")], "null"),
            ),
            (
                "zero elements",
                with(&[x.clone(), field("z", "U8", "[4, 0]")], "null"),
            ),
            ("empty name", with(&[field("", "U8", "[1]")], "null")),
            (
                "overflows",
                with(&[field("big", "U8", "[4294967296, 4294967296]")], "null"),
            ),
            (
                "overflows",
                with(&[field("big", "F64", "[2305843009213693952]")], "null"),
            ),
            (
                "together overflow",
                with(
                    &[
                        field("a", "U8", "[6917529027641081856]"),
                        field("b", "U8", "[6917529027641081856]"),
                    ],
                    "null",
                ),
            ),
            ("no fields", with(&[], "null")),
        ];
        for (expected, json) in cases {
            match serde_json::from_str::<ItemLayout>(&json) {
                Err(e) => assert!(e.to_string().contains(expected), "{json}: {e}"),
                Ok(l) => panic!("{json} parsed into {l:?}"),
            }
        }
        // A field read alone is checked too.
        assert!(serde_json::from_str::<FieldSpec>(&field("z", "U8", "[0]")).is_err());
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
