//! The config file's shape as serde reads it, before any check: the
//! `*File` types mirror the JSON keys one to one (unknown keys refused).
//! `config.rs` turns them into checked [`super::TableSpec`]s and
//! `grouped_table_spec.rs` into grouped ones; both import this file, and it
//! imports neither. The two checks they make alike live here, on
//! [`TableConfigFile`]: the table's name and its fields' dtypes.
use std::path::PathBuf;

use seed_replay::{DType, ItemLayout, ItemLayoutBuilder};
use serde::Deserialize;

use crate::wire_dtype;

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfigFile {
    /// Where `Checkpoint` writes `<table>.seedrpl`; without it the RPC is
    /// refused.
    #[serde(default)]
    pub checkpoint_dir: Option<PathBuf>,
    pub tables: Vec<TableConfigFile>,
}

/// One table as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableConfigFile {
    pub name: String,
    pub capacity: usize,
    pub fields: Vec<FieldConfig>,
    #[serde(default)]
    pub policy_version_field: Option<String>,
    pub sampler: SamplerFile,
    #[serde(default)]
    pub writer_policy: WriterPolicyFile,
    #[serde(default)]
    pub rate_limiter: Option<RateLimiterFile>,
    #[serde(default)]
    pub policy_lag: Option<PolicyLagFile>,
    /// Seed of the sampling randomness.
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub storage_dir: Option<PathBuf>,
    /// How the slots are laid out: `records` (default: a slot's sequence
    /// word and fields in whole cache lines, the fewest lines per sample)
    /// or `columns` (a column per field: for a large mapped table of
    /// small items, 32 bytes a slot of a 16-byte item touches against 64,
    /// so half the disk and a first fill several times faster). A mapped
    /// directory keeps the order it was made with.
    #[serde(default)]
    pub storage_order: Option<String>,
    /// Mapped table directories (shards) written by other servers, served
    /// together as this one read-only table (`server/sharded_table.rs`).
    #[serde(default)]
    pub load: Vec<PathBuf>,
    /// How long an insert waits for the rate limiter.
    #[serde(default)]
    pub insert_timeout_ms: Option<u64>,
}

impl TableConfigFile {
    /// Whether the name is 1 to 128 of A-Z, a-z, 0-9, `_`, `-`.
    pub(crate) fn has_valid_name(&self) -> bool {
        !self.name.is_empty()
            && self.name.len() <= 128
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    /// A layout builder holding the fields in file order, not yet built (a
    /// plain table adds its policy-version field first). A field whose last
    /// dimension is -1 is variable-length (its values stored without
    /// padding in the table's heap). The error, for the `fields` setting,
    /// names the field whose dtype is unknown or whose `max_len` is out of
    /// place ([`Self::step_fields`] reads them alike).
    pub(crate) fn layout_builder(&self) -> Result<ItemLayoutBuilder, String> {
        let mut builder = ItemLayout::builder();
        for f in &self.fields {
            let (dtype, shape, _) = f.parts()?;
            builder = match f.variable_dim()? {
                Some(v) => builder.variable_field(&f.name, dtype, &shape, v.max_len),
                None => builder.field(&f.name, dtype, &shape),
            };
        }
        Ok(builder)
    }

    /// The fields of a grouped table's step: a layout of each field's
    /// fixed part (a variable-length field's dimensions before its last)
    /// and, per field, its variable last dimension if it has one.
    pub(crate) fn step_fields(
        &self,
    ) -> Result<(ItemLayoutBuilder, Vec<Option<VariableDim>>), String> {
        let mut builder = ItemLayout::builder();
        let mut variable = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            let (dtype, shape, _) = f.parts()?;
            variable.push(f.variable_dim()?);
            builder = builder.field(&f.name, dtype, &shape);
        }
        Ok((builder, variable))
    }
}

/// A variable last dimension of a field (`-1` in the file), with its
/// optional bound: a grouped table's step field or a ring table's item
/// field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VariableDim {
    /// Elements of the last dimension one step may hold at most.
    pub max_len: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldConfig {
    pub name: String,
    /// `u8`, `bool`, `u32`, `i32`, `f32`, `u64`, `i64`, `f64`.
    pub dtype: String,
    /// Shape of one item's value; `[]` is a scalar. A last dimension of -1
    /// makes the field variable-length (its length varies from item to
    /// item, or step to step; stored without padding).
    pub shape: Vec<i64>,
    /// A variable-length field's longest last dimension.
    #[serde(default)]
    pub max_len: Option<u64>,
}

impl FieldConfig {
    /// The variable last dimension (`-1` in the shape) with its
    /// `max_len`, or `None` for a fixed-shape field; `max_len` on a fixed
    /// field, 0, or past what a row can hold is refused, naming the field.
    fn variable_dim(&self) -> Result<Option<VariableDim>, String> {
        let (_, _, is_variable) = self.parts()?;
        match (is_variable, self.max_len) {
            (false, None) => Ok(None),
            (false, Some(_)) => Err(format!(
                "field `{}`: `max_len` is for a variable-length field (a shape whose \
                 last dimension is -1), and {:?} has none",
                self.name, self.shape
            )),
            (true, Some(m)) if m == 0 || m > seed_replay::MAX_VARIABLE_LEN => Err(format!(
                "field `{}`: `max_len` must be in 1..={}, is {m}",
                self.name,
                seed_replay::MAX_VARIABLE_LEN
            )),
            (true, max_len) => Ok(Some(VariableDim { max_len })),
        }
    }

    /// The dtype, the fixed dimensions and whether a variable one follows.
    fn parts(&self) -> Result<(DType, Vec<usize>, bool), String> {
        let dtype = wire_dtype::parse(&self.dtype).ok_or_else(|| {
            format!(
                "field `{}`: dtype `{}` is not one of {}",
                self.name,
                self.dtype,
                wire_dtype::ALL.map(wire_dtype::name).join(", ")
            )
        })?;
        let (fixed, variable) = match self.shape.split_last() {
            Some((-1, fixed)) => (fixed, true),
            _ => (&self.shape[..], false),
        };
        let shape = fixed
            .iter()
            .map(|&d| {
                usize::try_from(d).map_err(|_| {
                    format!(
                        "field `{}`: shape {:?}: dimension {d} is negative (only the last \
                         may be -1, variable-length)",
                        self.name, self.shape
                    )
                })
            })
            .collect::<Result<Vec<usize>, String>>()?;
        Ok((dtype, shape, variable))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SamplerFile {
    Fifo,
    MaxTimesSampled {
        max_times: u32,
    },
    Uniform,
    UniformWithoutReplacement,
    Recent {
        window: usize,
    },
    Prioritized {
        #[serde(default)]
        alpha: Option<f64>,
        #[serde(default)]
        beta: Option<f64>,
        #[serde(default)]
        eps: Option<f64>,
    },
    /// Steps of trajectories released in whole groups: see
    /// [`grouped_table_spec`].
    Grouped {
        group_size: u32,
        /// `u64` (default) or `str`: the kind of trajectory and group ids
        /// the table's writers give.
        #[serde(default)]
        ids: Option<String>,
        /// Ready groups kept at most; when one more becomes ready, the
        /// oldest is dropped (counted). Absent: no limit but `capacity`.
        #[serde(default)]
        max_queue_size: Option<u64>,
    },
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum WriterPolicyFile {
    #[default]
    OverwriteOldest,
    DropOldest,
    Block {
        timeout_ms: u64,
    },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimiterFile {
    pub min_size_to_sample: usize,
    #[serde(default)]
    pub samples_per_insert: Option<f64>,
    #[serde(default)]
    pub error_buffer: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyLagFile {
    pub max_lag: u64,
    /// `drop` or `down_weight` (grouped tables: `drop` or `keep`).
    pub action: String,
    /// The factor for `down_weight`.
    #[serde(default)]
    pub weight: Option<f32>,
}
