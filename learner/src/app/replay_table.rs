//! `learner --print-replay-table-config`: the replay server's config file
//! for a table that holds exactly the unrolls this learner's flags build
//! (field names, dtypes and shapes from the env and the model), with the
//! sampler, capacity, rate limiter and lag cap the same flags give the
//! in-process buffer.
//!
//! Why: a remote table (`--replay-addr`) must have the learner's item
//! layout to the byte, which depends on the env (observation shape and
//! dtype, action space), the model (an LSTM adds its initial state) and
//! `--unroll-length`; writing that by hand is error-prone, and the learner
//! refuses any difference at start-up. Cost: no model is built.
use crate::app::config::LearnerConfig;
use crate::app::training::unroll_spec;
use crate::error::LearnerError;
use crate::model::ModelConfig;
use crate::unroll_store::remote::table_layout::table_config_json;

/// The table's name when `--replay-addr` does not give one.
pub const DEFAULT_TABLE_NAME: &str = "unrolls";

/// The config file (pretty JSON) for `config`'s unrolls; the table is named
/// as in `--replay-addr`, else [`DEFAULT_TABLE_NAME`].
pub fn replay_table_config(config: &LearnerConfig) -> Result<String, LearnerError> {
    let train = config.train.as_ref().ok_or_else(|| {
        LearnerError::Config(
            "--print-replay-table-config with --no-train: a learner that does not train \
             stores no unrolls"
                .into(),
        )
    })?;
    let env = config.env.as_ref().ok_or_else(|| {
        LearnerError::Config(
            "--print-replay-table-config needs --env (the layout depends on the env's \
             observations and actions)"
                .into(),
        )
    })?;
    let spec = env.spec();
    let model = ModelConfig::new(&spec, &config.model);
    let layout = unroll_spec(train, &spec, &model)
        .layout()
        .map_err(|e| LearnerError::Config(format!("unroll layout: {e}")))?;
    let replay = train.replay.replay_config(train.batch_size, config.seed);
    let name = train
        .replay
        .remote
        .as_ref()
        .map_or(DEFAULT_TABLE_NAME, |r| r.table.as_str());
    let mut json = table_config_json(name, &layout, &replay);
    // One line per field: the file is read (and edited) by people.
    let mut compact = Vec::new();
    if let Some(fields) = json["tables"][0]["fields"].as_array_mut() {
        for (i, f) in fields.iter_mut().enumerate() {
            compact.push(f.to_string());
            *f = serde_json::Value::String(format!("@field{i}@"));
        }
    }
    let mut text = serde_json::to_string_pretty(&json)
        .map_err(|e| LearnerError::Config(format!("table config: {e}")))?;
    for (i, f) in compact.iter().enumerate() {
        text = text.replace(&format!("\"@field{i}@\""), f);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_env::EnvConfig;

    #[test]
    fn cartpole_vtrace_table_config_is_served_as_the_learner_needs() {
        let mut c =
            LearnerConfig::serving("127.0.0.1:0".parse().expect("address"), EnvConfig::CartPole);
        c.train = LearnerConfig::default().train;
        let text = replay_table_config(&c).unwrap();
        let served = seed_replay_service::ServiceConfig::from_json(&text).unwrap();
        let t = &served.tables[0];
        assert_eq!(t.name, DEFAULT_TABLE_NAME);
        // T = 16: 17 steps of 4 f32 observations, 2 logits per step.
        let obs = t.layout.field("obs").unwrap().1;
        assert_eq!(obs.shape(), &[17, 4]);
        assert_eq!(
            t.layout.field("behaviour_logits").unwrap().1.shape(),
            &[17, 2]
        );
        assert!(t.layout.field("initial_h").is_none());
        assert_eq!(t.replay.capacity, 32);
        c.env = None;
        let e = replay_table_config(&c).unwrap_err().to_string();
        assert!(e.contains("--env"), "{e}");
    }
}
