//! The remote table against the learner's unrolls: [`check_layout`] says
//! whether a served table's items are exactly the unrolls this learner
//! writes (field names, dtypes, shapes, the policy-version field), naming
//! the first field that differs and both values; [`table_config_json`]
//! writes the replay server's config entry for those unrolls, so a user
//! never has to spell a layout by hand (`learner
//! --print-replay-table-config`).
//!
//! Why exact: the learner inserts every field and reads sampled fields by
//! name into preallocated tensors of its own shapes; a field of another
//! shape would be refused by the server at the first insert (or, worse,
//! collated wrongly), so the mismatch is reported at start-up instead.
//! Field order may differ: inserts name their fields and the collator reads
//! by name. Cost: a walk over a dozen fields, once.
use seed_replay::{ItemLayout, ReplayConfig, SamplerConfig, WriterPolicy};
use seed_replay_service::pb::TableInfo;
use seed_replay_service::wire_dtype;
use serde_json::{json, Value};

/// `None` when `info`'s items are `layout`'s; otherwise what differs,
/// naming the field and both values ("here" is the learner).
pub fn check_layout(layout: &ItemLayout, info: &TableInfo) -> Option<String> {
    for f in layout.fields() {
        let Some(remote) = info.fields.iter().find(|r| r.name == f.name()) else {
            return Some(format!(
                "field `{}` ({} {:?} here) is missing on the server",
                f.name(),
                wire_dtype::name(f.dtype()),
                f.shape()
            ));
        };
        let dtype = wire_dtype::name(f.dtype());
        let remote_dtype = wire_dtype::wire_name(remote.dtype);
        if dtype != remote_dtype {
            return Some(format!(
                "field `{}`: dtype {dtype} here, {remote_dtype} on the server",
                f.name()
            ));
        }
        let remote_shape: Vec<usize> = remote.shape.iter().map(|&d| d as usize).collect();
        if remote_shape != f.shape() {
            return Some(format!(
                "field `{}`: shape {:?} here, {remote_shape:?} on the server",
                f.name(),
                f.shape()
            ));
        }
    }
    if let Some(extra) = info.fields.iter().find(|r| layout.field(&r.name).is_none()) {
        return Some(format!(
            "the server's field `{}` is not one this learner writes",
            extra.name
        ));
    }
    let here = layout
        .policy_version_field()
        .map(|i| layout.fields()[i].name())
        .unwrap_or_default();
    if here != info.policy_version_field {
        return Some(format!(
            "policy_version_field: `{here}` here, `{}` on the server (the lag cap needs it)",
            info.policy_version_field
        ));
    }
    None
}

/// The replay server's config file (`{"tables": [...]}`) with one table
/// `name` holding `layout`'s items under `replay`'s settings.
pub fn table_config_json(name: &str, layout: &ItemLayout, replay: &ReplayConfig) -> Value {
    let fields: Vec<Value> = layout
        .fields()
        .iter()
        .map(
            |f| json!({"name": f.name(), "dtype": wire_dtype::name(f.dtype()), "shape": f.shape()}),
        )
        .collect();
    let sampler = match &replay.sampler {
        SamplerConfig::Fifo => json!({"kind": "fifo"}),
        SamplerConfig::MaxTimesSampled { max_times } => {
            json!({"kind": "max_times_sampled", "max_times": max_times})
        }
        SamplerConfig::Uniform => json!({"kind": "uniform"}),
        SamplerConfig::UniformWithoutReplacement => json!({"kind": "uniform_without_replacement"}),
        SamplerConfig::Recent { window } => json!({"kind": "recent", "window": window}),
        SamplerConfig::Prioritized(p) => {
            json!({"kind": "prioritized", "alpha": p.alpha, "beta": p.beta, "eps": p.eps})
        }
        SamplerConfig::Grouped => json!({"kind": "grouped"}),
    };
    let writer = match replay.writer_policy {
        WriterPolicy::OverwriteOldest => json!({"kind": "overwrite_oldest"}),
        WriterPolicy::DropOldest => json!({"kind": "drop_oldest"}),
        WriterPolicy::Block { timeout } => {
            json!({"kind": "block", "timeout_ms": timeout.as_millis() as u64})
        }
    };
    let mut table = json!({
        "name": name,
        "capacity": replay.capacity,
        "fields": fields,
        "sampler": sampler,
        "writer_policy": writer,
        "seed": replay.seed,
    });
    if let Some(i) = layout.policy_version_field() {
        table["policy_version_field"] = json!(layout.fields()[i].name());
    }
    if let Some(l) = &replay.rate_limiter {
        // `min_size` has unbounded diffs; the ratio limiter is centred with
        // an error buffer on either side (`RateLimiterConfig`).
        table["rate_limiter"] = if l.min_diff == f64::MIN && l.max_diff == f64::MAX {
            json!({"min_size_to_sample": l.min_size_to_sample})
        } else {
            json!({
                "min_size_to_sample": l.min_size_to_sample,
                "samples_per_insert": l.samples_per_insert,
                "error_buffer": (l.max_diff - l.min_diff) / 2.0,
            })
        };
    }
    if let Some(p) = &replay.policy_lag {
        table["policy_lag"] = match p.action {
            seed_replay::LagAction::Drop => json!({"max_lag": p.max_lag, "action": "drop"}),
            seed_replay::LagAction::DownWeight(w) => {
                json!({"max_lag": p.max_lag, "action": "down_weight", "weight": w})
            }
        };
    }
    json!({ "tables": [table] })
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_replay::{DType, RateLimiterConfig};
    use seed_replay_service::ServiceConfig;

    fn layout(obs: &[usize]) -> ItemLayout {
        ItemLayout::builder()
            .field("obs", DType::F32, obs)
            .field("v", DType::U64, &[])
            .policy_version_field("v")
            .build()
            .unwrap()
    }

    fn served(layout: &ItemLayout, replay: &ReplayConfig) -> TableInfo {
        // What the server reports for the config we print: the round trip
        // through its own parser.
        let text = table_config_json("t", layout, replay).to_string();
        let spec = &ServiceConfig::from_json(&text).unwrap().tables[0];
        assert_eq!(&spec.layout, layout);
        assert_eq!(spec.replay.capacity, replay.capacity);
        TableInfo {
            name: "t".into(),
            fields: layout
                .fields()
                .iter()
                .map(|f| seed_replay_service::pb::FieldInfo {
                    name: f.name().into(),
                    dtype: wire_dtype::to_wire(f.dtype()) as i32,
                    shape: f.shape().iter().map(|&d| d as u32).collect(),
                    ..Default::default()
                })
                .collect(),
            policy_version_field: "v".into(),
            ..TableInfo::default()
        }
    }

    #[test]
    fn the_printed_config_parses_into_the_same_table() {
        let l = layout(&[17, 4]);
        let replay = ReplayConfig::new(32, SamplerConfig::Uniform)
            .with_rate_limiter(RateLimiterConfig::sample_to_insert_ratio(4.0, 16, 64.0));
        let info = served(&l, &replay);
        assert_eq!(check_layout(&l, &info), None);
        let text = table_config_json("t", &l, &replay).to_string();
        let spec = &ServiceConfig::from_json(&text).unwrap().tables[0];
        assert_eq!(spec.replay.rate_limiter, replay.rate_limiter);
    }

    #[test]
    fn a_mismatch_names_the_field_and_both_values() {
        let info = served(
            &layout(&[17, 4]),
            &ReplayConfig::new(8, SamplerConfig::Fifo),
        );
        let e = check_layout(&layout(&[17, 8]), &info).unwrap();
        assert!(
            e.contains("`obs`") && e.contains("[17, 8]") && e.contains("[17, 4]"),
            "{e}"
        );
        let other = ItemLayout::builder()
            .field("obs", DType::U8, &[17, 4])
            .field("v", DType::U64, &[])
            .policy_version_field("v")
            .build()
            .unwrap();
        let e = check_layout(&other, &info).unwrap();
        assert!(
            e.contains("`obs`") && e.contains("u8 here") && e.contains("f32 on"),
            "{e}"
        );
        let more = ItemLayout::builder()
            .field("obs", DType::F32, &[17, 4])
            .field("v", DType::U64, &[])
            .field("h", DType::F32, &[8])
            .policy_version_field("v")
            .build()
            .unwrap();
        let e = check_layout(&more, &info).unwrap();
        assert!(e.contains("`h`") && e.contains("missing"), "{e}");
        let fewer = ItemLayout::builder()
            .field("obs", DType::F32, &[17, 4])
            .build()
            .unwrap();
        let e = check_layout(&fewer, &info).unwrap();
        assert!(e.contains("`v`") && e.contains("not one"), "{e}");
    }
}
