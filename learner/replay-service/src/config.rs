//! The service's configuration file (JSON): the tables to serve, each with
//! its item layout, capacity, sampler, writer policy, rate limiter, lag cap
//! and storage, checked once at start-up into [`TableSpec`]s.
//!
//! ```json
//! {
//!   "checkpoint_dir": "/var/lib/replay/checkpoints",
//!   "tables": [{
//!     "name": "experience",
//!     "capacity": 100000,
//!     "fields": [
//!       {"name": "obs", "dtype": "f32", "shape": [3, 4]},
//!       {"name": "action", "dtype": "i64", "shape": []},
//!       {"name": "policy_version", "dtype": "u64", "shape": []}
//!     ],
//!     "policy_version_field": "policy_version",
//!     "sampler": {"kind": "prioritized", "alpha": 0.6, "beta": 0.4},
//!     "writer_policy": {"kind": "overwrite_oldest"},
//!     "rate_limiter": {"min_size_to_sample": 1000, "samples_per_insert": 4.0, "error_buffer": 400.0},
//!     "policy_lag": {"max_lag": 8, "action": "drop"},
//!     "storage_dir": "/var/lib/replay/experience"
//!   }]
//! }
//! ```
//!
//! Samplers (`kind`): `fifo`, `max_times_sampled` (`max_times`), `uniform`,
//! `uniform_without_replacement`, `recent` (`window`), `prioritized`
//! (`alpha` 0.6, `beta` 0.4, `eps` 1e-6 by default), and `grouped`
//! (`group_size`: steps of trajectories released in whole groups, capacity
//! in steps; see [`grouped_table_spec`]). Writer policies:
//! `overwrite_oldest` (default), `drop_oldest`, `block` (`timeout_ms`). Rate
//! limiter: `min_size_to_sample` alone (Reverb's `MinSize`), or with
//! `samples_per_insert` and `error_buffer` (Reverb's `SampleToInsertRatio`).
//! Lag cap: `action` `drop` or `down_weight` with `weight`. `storage_dir`:
//! a memory-mapped table directory, created when absent and reopened with
//! its items when present; without it the table lives in memory.
//! `storage_order`: `records` (default) or `columns` (for large mapped
//! tables of small items: half the bytes per slot). `load`: a
//! list of mapped directories written by other servers, served together as
//! this table, read-only (`server/sharded_table.rs`). Every key
//! is checked: an unknown one is an error naming it, not a silent default.
//!
//! Why JSON: the workspace already parses it (`serde_json`) and the same
//! file can be written by a Python launcher without a TOML library.
//! Cost: parsed once at start-up.
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use seed_replay::{
    ItemLayout, LagAction, PolicyLagCap, PrioritizedConfig, RateLimiterConfig, ReplayConfig,
    SamplerConfig, StorageOrder, WriterPolicy,
};

use crate::error::ConfigError;

pub mod file_format;
pub mod grouped_table_spec;
pub mod step_layout;

pub use self::file_format::{
    FieldConfig, PolicyLagFile, RateLimiterFile, SamplerFile, ServiceConfigFile, TableConfigFile,
    WriterPolicyFile,
};
use self::grouped_table_spec::GroupedTableSpec;

/// How long an insert waits for room (rate limiter) before its stream ends
/// with `DEADLINE_EXCEEDED`, unless the table says otherwise.
pub const DEFAULT_INSERT_TIMEOUT_MS: u64 = 60_000;

/// The service's checked configuration.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub checkpoint_dir: Option<PathBuf>,
    pub tables: Vec<TableSpec>,
    /// Tables with sampler `grouped`.
    pub grouped: Vec<GroupedTableSpec>,
}

/// One table, checked: what the server builds a buffer from.
#[derive(Debug, Clone)]
pub struct TableSpec {
    pub name: String,
    pub layout: ItemLayout,
    pub replay: ReplayConfig,
    pub storage_dir: Option<PathBuf>,
    /// Shard directories to serve as one read-only table (empty: the table
    /// is its own storage). Checked by [`check_load`].
    pub load: Vec<PathBuf>,
    pub insert_timeout: Duration,
}

impl ServiceConfig {
    /// Reads and checks a config file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_json(&text).map_err(|e| match e {
            ConfigError::Parse { reason, .. } => ConfigError::Parse {
                path: path.to_owned(),
                reason,
            },
            other => other,
        })
    }

    /// Parses and checks the file's text.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let file: ServiceConfigFile =
            serde_json::from_str(text).map_err(|e| ConfigError::Parse {
                path: PathBuf::from("<text>"),
                reason: e.to_string(),
            })?;
        file.check()
    }
}

impl ServiceConfigFile {
    /// Every table checked (a buffer config that `ReplayBuffer::new` would
    /// accept), names unique and usable as file names.
    pub fn check(self) -> Result<ServiceConfig, ConfigError> {
        if self.tables.is_empty() {
            return Err(ConfigError::Service {
                reason: "`tables` is empty: nothing to serve".into(),
            });
        }
        let mut names = HashSet::new();
        let mut dirs = HashSet::new();
        let mut tables = Vec::with_capacity(self.tables.len());
        let mut grouped = Vec::new();
        for t in self.tables {
            if matches!(t.sampler, SamplerFile::Grouped { .. }) {
                let spec = GroupedTableSpec::check(t)?;
                if !names.insert(spec.name.clone()) {
                    return Err(ConfigError::Service {
                        reason: format!("table `{}` is declared twice", spec.name),
                    });
                }
                claim_dir(&mut dirs, &spec.name, spec.storage_dir.as_deref())?;
                grouped.push(spec);
                continue;
            }
            let spec = t.check()?;
            if !names.insert(spec.name.clone()) {
                return Err(ConfigError::Service {
                    reason: format!("table `{}` is declared twice", spec.name),
                });
            }
            claim_dir(&mut dirs, &spec.name, spec.storage_dir.as_deref())?;
            tables.push(spec);
        }
        check_directories_unshared(&tables)?;
        Ok(ServiceConfig {
            checkpoint_dir: self.checkpoint_dir,
            tables,
            grouped,
        })
    }
}

impl TableConfigFile {
    fn check(self) -> Result<TableSpec, ConfigError> {
        let name = self.name.clone();
        let err = |setting: &'static str, reason: String| ConfigError::Table {
            table: name.clone(),
            setting,
            reason,
        };
        if !self.has_valid_name() {
            return Err(err(
                "name",
                "must be 1 to 128 of A-Z, a-z, 0-9, `_`, `-` (it names the checkpoint file)".into(),
            ));
        }
        let mut builder = self.layout_builder().map_err(|e| err("fields", e))?;
        if let Some(p) = &self.policy_version_field {
            builder = builder.policy_version_field(p);
        }
        let layout = builder.build().map_err(|e| err("fields", e.to_string()))?;
        let sampler = match self.sampler {
            SamplerFile::Fifo => SamplerConfig::Fifo,
            SamplerFile::MaxTimesSampled { max_times } => {
                SamplerConfig::MaxTimesSampled { max_times }
            }
            SamplerFile::Uniform => SamplerConfig::Uniform,
            SamplerFile::UniformWithoutReplacement => SamplerConfig::UniformWithoutReplacement,
            SamplerFile::Recent { window } => SamplerConfig::Recent { window },
            SamplerFile::Prioritized { alpha, beta, eps } => {
                let d = PrioritizedConfig::default();
                SamplerConfig::Prioritized(PrioritizedConfig {
                    alpha: alpha.unwrap_or(d.alpha),
                    beta: beta.unwrap_or(d.beta),
                    eps: eps.unwrap_or(d.eps),
                })
            }
            SamplerFile::Grouped { .. } => {
                return Err(err("sampler", "grouped tables are checked apart".into()))
            }
        };
        let writer_policy = match self.writer_policy {
            WriterPolicyFile::OverwriteOldest => WriterPolicy::OverwriteOldest,
            WriterPolicyFile::DropOldest => WriterPolicy::DropOldest,
            WriterPolicyFile::Block { timeout_ms } => WriterPolicy::Block {
                timeout: Duration::from_millis(timeout_ms),
            },
        };
        // Settings are added one at a time and the buffer's own check run
        // after each, so an error names the setting that made it fail.
        let check = |config: &ReplayConfig, setting: &'static str| {
            config
                .validate_for(&layout)
                .map_err(|e| err(setting, e.to_string()))
        };
        if self.capacity == 0 || self.capacity > u32::MAX as usize {
            return Err(err(
                "capacity",
                format!("must be in 1..=4294967295, is {}", self.capacity),
            ));
        }
        let order = match self.storage_order.as_deref() {
            None | Some("records") => StorageOrder::Records,
            Some("columns") => StorageOrder::Columns,
            Some(other) => {
                return Err(err(
                    "storage_order",
                    format!("`{other}` is not `records` or `columns`"),
                ))
            }
        };
        let mut replay = ReplayConfig::new(self.capacity, sampler)
            .with_seed(self.seed)
            .with_storage_order(order);
        check(&replay, "sampler")?;
        replay = replay.with_writer_policy(writer_policy);
        check(&replay, "writer_policy")?;
        if let Some(l) = self.rate_limiter {
            let limiter = match (l.samples_per_insert, l.error_buffer) {
                (None, None) => RateLimiterConfig::min_size(l.min_size_to_sample),
                (Some(spi), Some(eb)) => {
                    RateLimiterConfig::sample_to_insert_ratio(spi, l.min_size_to_sample, eb)
                }
                _ => {
                    return Err(err(
                        "rate_limiter",
                        "give `samples_per_insert` and `error_buffer` together, or neither".into(),
                    ))
                }
            };
            replay = replay.with_rate_limiter(limiter);
            check(&replay, "rate_limiter")?;
        }
        if let Some(p) = self.policy_lag {
            let action = match (p.action.as_str(), p.weight) {
                ("drop", None) => LagAction::Drop,
                ("down_weight", Some(w)) => LagAction::DownWeight(w),
                ("drop", Some(_)) => {
                    return Err(err(
                        "policy_lag",
                        "`weight` is only for action `down_weight`".into(),
                    ))
                }
                ("down_weight", None) => {
                    return Err(err(
                        "policy_lag",
                        "action `down_weight` needs a `weight`".into(),
                    ))
                }
                (other, _) => {
                    return Err(err(
                        "policy_lag",
                        format!("action `{other}` is not `drop` or `down_weight`"),
                    ))
                }
            };
            replay = replay.with_policy_lag(PolicyLagCap {
                max_lag: p.max_lag,
                action,
            });
            check(&replay, "policy_lag")?;
        }
        let spec = TableSpec {
            name: self.name,
            layout,
            replay,
            storage_dir: self.storage_dir,
            load: self.load,
            insert_timeout: Duration::from_millis(
                self.insert_timeout_ms.unwrap_or(DEFAULT_INSERT_TIMEOUT_MS),
            ),
        };
        check_load(&spec)?;
        Ok(spec)
    }
}

/// The most shard directories one loaded table may have: the shard index
/// travels in the top 8 bits of its keys (`server/sharded_table.rs`).
pub const MAX_SHARDS: usize = 256;

/// Checks a table's `load` list: a loaded table takes no inserts, so it
/// has no `storage_dir` and no rate limiter, and its sampler is one that
/// never consumes (uniform, recent, prioritized); at most [`MAX_SHARDS`]
/// directories, none twice. Nothing to check without `load`.
pub fn check_load(spec: &TableSpec) -> Result<(), ConfigError> {
    if spec.load.is_empty() {
        return Ok(());
    }
    let err = |setting: &'static str, reason: String| ConfigError::Table {
        table: spec.name.clone(),
        setting,
        reason,
    };
    if spec.storage_dir.is_some() {
        return Err(err(
            "load",
            "a loaded table is served from its shard directories: give `load` or \
             `storage_dir`, not both"
                .into(),
        ));
    }
    if spec.load.len() > MAX_SHARDS {
        return Err(err(
            "load",
            format!("{} directories, at most {MAX_SHARDS}", spec.load.len()),
        ));
    }
    for (i, d) in spec.load.iter().enumerate() {
        if spec.load[..i].contains(d) {
            return Err(err("load", format!("{} is given twice", d.display())));
        }
    }
    if !matches!(
        spec.replay.sampler,
        SamplerConfig::Uniform | SamplerConfig::Recent { .. } | SamplerConfig::Prioritized(_)
    ) {
        return Err(err(
            "sampler",
            "a loaded table (`load`) samples with `uniform`, `recent` or `prioritized`: it \
             takes no inserts, so a consume-once sampler would empty it for good"
                .into(),
        ));
    }
    if spec.replay.rate_limiter.is_some() {
        return Err(err(
            "rate_limiter",
            "a loaded table (`load`) takes no inserts, so a sample-to-insert limiter would \
             stop it for good"
                .into(),
        ));
    }
    Ok(())
}

impl ServiceConfig {
    /// Adds `--load` directories: `TABLE=DIR` loads `DIR` as a shard of
    /// table `TABLE`; a bare `DIR` is a shard of the config's only table
    /// (an error when it declares several). Each table's `load` list is
    /// checked again afterwards.
    pub fn add_loaded_shards(&mut self, args: &[String]) -> Result<(), ConfigError> {
        for arg in args {
            let named = arg
                .split_once('=')
                .filter(|(t, _)| self.tables.iter().any(|s| s.name == *t));
            let (table, dir) = match named {
                Some((t, d)) => (t.to_owned(), PathBuf::from(d)),
                None if self.tables.len() == 1 => (self.tables[0].name.clone(), PathBuf::from(arg)),
                None => {
                    return Err(ConfigError::Service {
                        reason: format!(
                            "--load {arg}: the config declares {} tables; write --load TABLE=DIR",
                            self.tables.len()
                        ),
                    })
                }
            };
            if let Some(spec) = self.tables.iter_mut().find(|s| s.name == table) {
                spec.load.push(dir);
            }
        }
        self.tables.iter().try_for_each(check_load)?;
        check_directories_unshared(&self.tables)
    }
}

/// Records table `name`'s `storage_dir`; refuses one another table has.
fn claim_dir(
    dirs: &mut HashSet<PathBuf>,
    name: &str,
    dir: Option<&Path>,
) -> Result<(), ConfigError> {
    match dir {
        Some(d) if !dirs.insert(d.to_path_buf()) => Err(ConfigError::Table {
            table: name.to_owned(),
            setting: "storage_dir",
            reason: format!("{} is used by another table", d.display()),
        }),
        _ => Ok(()),
    }
}

/// No directory is both a shard of one table and the storage or a shard of
/// another: one process maps a directory once.
fn check_directories_unshared(tables: &[TableSpec]) -> Result<(), ConfigError> {
    let mut owner: std::collections::HashMap<&Path, &str> = std::collections::HashMap::new();
    for t in tables {
        for d in t.storage_dir.iter().chain(&t.load) {
            if let Some(other) = owner.insert(d, &t.name) {
                if other != t.name {
                    return Err(ConfigError::Table {
                        table: t.name.clone(),
                        setting: "load",
                        reason: format!("{} is used by table `{other}` too", d.display()),
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(extra: &str) -> String {
        format!(
            r#"{{"tables": [{{"name": "t", "capacity": 8,
                "fields": [{{"name": "obs", "dtype": "f32", "shape": [3, 4]}},
                           {{"name": "v", "dtype": "u64", "shape": []}}],
                {extra}}}]}}"#
        )
    }

    #[test]
    fn a_full_table_parses_into_the_buffer_config() {
        let c = ServiceConfig::from_json(&table(
            r#""policy_version_field": "v",
               "sampler": {"kind": "prioritized", "alpha": 0.5},
               "rate_limiter": {"min_size_to_sample": 2, "samples_per_insert": 2.0, "error_buffer": 8.0},
               "policy_lag": {"max_lag": 3, "action": "down_weight", "weight": 0.5},
               "seed": 7"#,
        ))
        .unwrap();
        let t = &c.tables[0];
        assert_eq!(t.layout.item_bytes(), 56);
        assert_eq!(t.layout.policy_version_field(), Some(1));
        assert!(matches!(
            t.replay.sampler,
            SamplerConfig::Prioritized(PrioritizedConfig { alpha, beta, .. }) if alpha == 0.5 && beta == 0.4
        ));
        assert_eq!(t.replay.seed, 7);
        assert!(t.replay.rate_limiter.is_some());
        assert_eq!(
            t.replay.policy_lag.map(|p| p.action),
            Some(LagAction::DownWeight(0.5))
        );
    }

    #[test]
    fn a_grouped_table_parses_apart_with_capacity_in_steps() {
        let c = ServiceConfig::from_json(&table(
            r#""sampler": {"kind": "grouped", "group_size": 8},
               "policy_lag": {"max_lag": 3, "action": "drop"}"#,
        ))
        .unwrap();
        assert!(c.tables.is_empty());
        let g = &c.grouped[0];
        assert_eq!((g.group_size, g.capacity_steps, g.max_lag), (8, 8, Some(3)));
        assert_eq!(g.layout.fixed_step_bytes(), 56);
        let e = ServiceConfig::from_json(&format!(
            r#"{{"tables": [{}, {}]}}"#,
            r#"{"name": "t", "capacity": 8, "sampler": {"kind": "fifo"},
                "fields": [{"name": "x", "dtype": "f32", "shape": []}]}"#,
            r#"{"name": "t", "capacity": 8, "sampler": {"kind": "grouped", "group_size": 1},
                "fields": [{"name": "x", "dtype": "f32", "shape": []}]}"#
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("declared twice"), "{e}");
    }

    #[test]
    fn a_grouped_table_keeps_its_storage_dir_to_itself() {
        let ring = r#"{"name": "ring", "capacity": 8, "storage_dir": "/tmp/shared", "sampler": {"kind": "uniform"},
            "fields": [{"name": "x", "dtype": "f32", "shape": []}]}"#;
        let pool = |dir: &str| {
            format!(
                r#"{{"name": "pool", "capacity": 8, "storage_dir": "{dir}",
                    "fields": [{{"name": "x", "dtype": "f32", "shape": []}}],
                    "sampler": {{"kind": "grouped", "group_size": 2}}}}"#
            )
        };
        let c =
            ServiceConfig::from_json(&format!(r#"{{"tables": [{ring}, {}]}}"#, pool("/tmp/own")))
                .unwrap();
        assert_eq!(
            c.grouped[0].storage_dir.as_deref(),
            Some(Path::new("/tmp/own"))
        );
        let err = ServiceConfig::from_json(&format!(
            r#"{{"tables": [{ring}, {}]}}"#,
            pool("/tmp/shared")
        ))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("table `pool`, `storage_dir`") && err.contains("another table"),
            "{err}"
        );
    }

    #[test]
    fn errors_name_the_table_and_setting() {
        let cases = [
            (
                r#""sampler": {"kind": "grouped", "group_size": 0}"#,
                "`sampler`",
            ),
            (
                r#""sampler": {"kind": "grouped", "group_size": 2}, "seed": 3"#,
                "`seed`",
            ),
            (
                r#""sampler": {"kind": "grouped", "group_size": 2},
                   "policy_lag": {"max_lag": 1, "action": "down_weight", "weight": 0.5}"#,
                "`policy_lag`",
            ),
            (r#""sampler": {"kind": "recent", "window": 9}"#, "`sampler`"),
            (
                r#""sampler": {"kind": "uniform"}, "writer_policy": {"kind": "block", "timeout_ms": 5}"#,
                "`writer_policy`",
            ),
            (
                r#""sampler": {"kind": "fifo"}, "rate_limiter": {"min_size_to_sample": 99}"#,
                "`rate_limiter`",
            ),
            (
                r#""sampler": {"kind": "fifo"}, "policy_lag": {"max_lag": 1, "action": "drop"}"#,
                "`policy_lag`",
            ),
        ];
        for (extra, setting) in cases {
            let e = ServiceConfig::from_json(&table(extra))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("table `t`") && e.contains(setting),
                "{extra}: {e}"
            );
        }
        let e = ServiceConfig::from_json(&table(r#""sampler": {"kind": "fifo"}, "colour": 1"#))
            .unwrap_err()
            .to_string();
        assert!(e.contains("colour"), "{e}");
        let e = ServiceConfig::from_json(
            r#"{"tables": [{"name": "t", "capacity": 8, "sampler": {"kind": "fifo"},
                "fields": [{"name": "x", "dtype": "f16", "shape": []}]}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("f16") && e.contains("`fields`"), "{e}");
        let e = ServiceConfig::from_json(
            r#"{"tables": [{"name": "../etc", "capacity": 8, "sampler": {"kind": "fifo"},
                "fields": [{"name": "x", "dtype": "f32", "shape": []}]}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`name`"), "{e}");
    }

    #[test]
    fn load_lists_shards_and_refuses_what_a_read_only_table_cannot_do() {
        let c = ServiceConfig::from_json(&table(
            r#""sampler": {"kind": "uniform"}, "load": ["/a", "/b"]"#,
        ))
        .unwrap();
        assert_eq!(
            c.tables[0].load,
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        let cases = [
            (
                r#""sampler": {"kind": "uniform"}, "load": ["/a"], "storage_dir": "/s""#,
                "`load`",
            ),
            (
                r#""sampler": {"kind": "uniform"}, "load": ["/a", "/a"]"#,
                "given twice",
            ),
            (
                r#""sampler": {"kind": "fifo"}, "load": ["/a"]"#,
                "`sampler`",
            ),
            (
                r#""sampler": {"kind": "uniform"}, "load": ["/a"],
                   "rate_limiter": {"min_size_to_sample": 1}"#,
                "`rate_limiter`",
            ),
        ];
        for (extra, expect) in cases {
            let e = ServiceConfig::from_json(&table(extra))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("table `t`") && e.contains(expect),
                "{extra}: {e}"
            );
        }
    }

    #[test]
    fn load_flags_name_their_table_or_the_only_one() {
        let mut c = ServiceConfig::from_json(&table(r#""sampler": {"kind": "uniform"}"#)).unwrap();
        let args = ["/x".to_owned(), "t=/y".to_owned(), "/z=w".to_owned()];
        c.add_loaded_shards(&args).unwrap();
        let load: Vec<&str> = c.tables[0]
            .load
            .iter()
            .map(|p| p.to_str().unwrap())
            .collect();
        // `/z=w` names no table: a directory with `=` in its name.
        assert_eq!(load, ["/x", "/y", "/z=w"]);

        let two = r#"{"tables": [
            {"name": "t", "capacity": 8, "sampler": {"kind": "uniform"},
             "fields": [{"name": "x", "dtype": "f32", "shape": []}]},
            {"name": "u", "capacity": 8, "sampler": {"kind": "fifo"},
             "fields": [{"name": "x", "dtype": "f32", "shape": []}]}]}"#;
        let mut c = ServiceConfig::from_json(two).unwrap();
        let e = c
            .add_loaded_shards(&["/x".to_owned()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--load /x") && e.contains("TABLE=DIR"), "{e}");
        let mut c = ServiceConfig::from_json(two).unwrap();
        let e = c
            .add_loaded_shards(&["u=/x".to_owned()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("table `u`") && e.contains("`sampler`"), "{e}");
        let mut c = ServiceConfig::from_json(two).unwrap();
        c.add_loaded_shards(&["t=/x".to_owned()]).unwrap();
        assert_eq!(c.tables[0].load, [PathBuf::from("/x")]);
        assert!(c.tables[1].load.is_empty());
    }
}
