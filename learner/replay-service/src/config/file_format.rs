//! The config file's shape as serde reads it, before any check: the
//! `*File` types mirror the JSON keys one to one (unknown keys refused).
//! `config.rs` turns them into checked [`super::TableSpec`]s and
//! `grouped_table_spec.rs` into grouped ones; both import this file, and it
//! imports neither.
use std::path::PathBuf;

use seed_replay::DType;
use serde::Deserialize;

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

/// The dtype a config names (`"f32"`, `"u8"`, ...).
pub(crate) fn parse_dtype(s: &str) -> Option<DType> {
    Some(match s {
        "u8" => DType::U8,
        "bool" => DType::Bool,
        "u32" => DType::U32,
        "i32" => DType::I32,
        "f32" => DType::F32,
        "u64" => DType::U64,
        "i64" => DType::I64,
        "f64" => DType::F64,
        _ => return None,
    })
}
