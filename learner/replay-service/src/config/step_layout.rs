//! [`StepLayout`]: the fields of one step of a grouped table, some of them
//! variable-length (a token list: `{"shape": [-1], "max_len": 4096}`).
//!
//! Why its own type: a ring table's item has a fixed size (its slots are
//! preallocated), so [`ItemLayout`] stays fixed-shape and the ring never
//! sees a variable field. A grouped table stores each trajectory's steps
//! appended (`server/grouped_table.rs`), where a step of 50 tokens and one
//! of 2,000 cost what they hold: a variable field is its fixed part (the
//! dimensions before the variable last one, `[]` for a list) plus, per
//! step, how many elements of the last dimension it has. The fixed parts
//! form an ordinary [`ItemLayout`]; its `num_bytes` of a variable field is
//! the bytes of one element of the last dimension (one token).
//! Cost: built once at start-up.
use seed_replay::{FieldSpec, ItemLayout};

pub use crate::config::file_format::VariableDim;

/// A grouped table's step layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepLayout {
    fixed: ItemLayout,
    variable: Vec<Option<VariableDim>>,
}

impl StepLayout {
    /// `fixed` and one entry per field of it (`None`: fixed-shape). Panics
    /// when the lengths differ (a caller's bug).
    pub fn new(fixed: ItemLayout, variable: Vec<Option<VariableDim>>) -> Self {
        assert_eq!(fixed.fields().len(), variable.len(), "one entry per field");
        StepLayout { fixed, variable }
    }

    /// Every field fixed-shape.
    pub fn fixed(layout: ItemLayout) -> Self {
        let variable = vec![None; layout.fields().len()];
        StepLayout::new(layout, variable)
    }

    /// The fields' fixed parts (a variable field's dimensions before its
    /// last one).
    pub fn units(&self) -> &ItemLayout {
        &self.fixed
    }

    /// The fields in order, each with its variable dimension if any.
    pub fn fields(&self) -> impl ExactSizeIterator<Item = (&FieldSpec, Option<VariableDim>)> + '_ {
        self.fixed
            .fields()
            .iter()
            .zip(self.variable.iter().copied())
    }

    /// Field `index`'s variable dimension, if it has one.
    pub fn variable(&self, index: usize) -> Option<VariableDim> {
        self.variable.get(index).copied().flatten()
    }

    /// Whether any field is variable-length.
    pub fn has_variable(&self) -> bool {
        self.variable.iter().any(Option::is_some)
    }

    /// Bytes of one step's fixed-shape fields.
    pub fn fixed_step_bytes(&self) -> usize {
        self.fields()
            .filter(|(_, v)| v.is_none())
            .map(|(f, _)| f.num_bytes())
            .sum()
    }
}
