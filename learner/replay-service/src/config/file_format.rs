//! The config file's shape as serde reads it, before any check: the
//! `*File` types mirror the JSON keys one to one (unknown keys refused).
//! `config.rs` turns them into checked [`super::TableSpec`]s and
//! `grouped_table_spec.rs` into grouped ones; both import this file, and it
//! imports neither. The two checks they make alike live here, on
//! [`TableConfigFile`]: the table's name and its fields' dtypes.
use std::path::PathBuf;

use seed_replay::{ItemLayout, ItemLayoutBuilder};
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
    /// plain table adds its policy-version field first). The error, for
    /// the `fields` setting, names the field whose dtype is unknown.
    pub(crate) fn layout_builder(&self) -> Result<ItemLayoutBuilder, String> {
        let mut builder = ItemLayout::builder();
        for f in &self.fields {
            let dtype = wire_dtype::parse(&f.dtype).ok_or_else(|| {
                format!(
                    "field `{}`: dtype `{}` is not one of {}",
                    f.name,
                    f.dtype,
                    wire_dtype::ALL.map(wire_dtype::name).join(", ")
                )
            })?;
            builder = builder.field(&f.name, dtype, &f.shape);
        }
        Ok(builder)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldConfig {
    pub name: String,
    /// `u8`, `bool`, `u32`, `i32`, `f32`, `u64`, `i64`, `f64`.
    pub dtype: String,
    /// Shape of one item's value; `[]` is a scalar.
    pub shape: Vec<usize>,
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
    /// `drop` or `down_weight`.
    pub action: String,
    /// The factor for `down_weight`.
    #[serde(default)]
    pub weight: Option<f32>,
}
