//! [`NativeActor`]: the actor configuration and env adapters that
//! `seed_rs.Actor` builds, and `run`, which drives them with the Rust actor
//! client on this thread.
//!
//! # Threads and the GIL
//!
//! `run` builds a current-thread tokio runtime (as the `actor` binary does)
//! and blocks on [`run_actor_with_envs`] with the GIL released; every env
//! call takes it back ([`PyEnv`]). So the whole actor runs on the calling
//! thread, other Python threads run during network waits, and Ctrl-C is
//! noticed within 50 ms ([`InterruptWatch`]) and ends the run politely.
//! Taking the GIL per env call costs about 0.35 us per step; holding it
//! for the whole run and releasing it only while tokio's thread is parked
//! (park hooks around `PyEval_SaveThread`) saved nothing measurable end to
//! end, so the `unsafe` it needs is not here (`benches/results/serving.md`).
//!
//! # Cost
//!
//! Building the runtime and the envs' wrappers once per `run`; nothing per
//! step beyond [`PyEnv`]'s own.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use seed_actor::{
    run_actor_with_envs, ActionSpace, ActorConfig, ClientTls, Env, EnvSpec, ObsDType,
};
use seed_env::EnvConfig;

use crate::error::to_py_err;
use crate::interrupt::InterruptWatch;
use crate::py_env::{PyEnv, PyEnvParts};
use crate::report::report_to_dict;

/// The Rust actor over Python envs (build it with `seed_rs.Actor`).
#[pyclass(module = "seed_rs._native", frozen)]
pub struct NativeActor {
    /// `max_env_steps`/`max_seconds` are set per `run`; `env` is unused
    /// (the envs are Python's).
    cfg: ActorConfig,
    spec: EnvSpec,
    envs: Vec<PyEnvParts>,
    /// Set while `run` drives the envs: a second `run` from another Python
    /// thread would step the same envs concurrently.
    running: AtomicBool,
}

/// Clears `running` when `run` returns, however it returns.
struct RunningGuard<'a>(&'a AtomicBool);

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        // Release, pairs with the Acquire of the next `run`'s swap: that run
        // sees every env change this one made (the GIL orders them as well).
        self.0.store(false, Ordering::Release);
    }
}

#[pymethods]
impl NativeActor {
    /// `envs`: one adapter per env (`seed_rs.gym_actor.EnvAdapter`);
    /// `spec`: the dict of `seed_rs.spaces.EnvSpec.to_native()`. Raises
    /// `ValueError` for a spec the learner would refuse or a bad setting.
    #[new]
    #[pyo3(signature = (
        envs, spec, *, learner, token=None, actor_id=None, seed=None, tls_ca=None,
        tls_domain=None, tls_cert=None, tls_key=None, max_reconnects=None,
    ))]
    // One parameter per Python keyword argument (pyo3 matches them by name).
    #[allow(clippy::too_many_arguments)]
    fn new(
        envs: Vec<Bound<'_, PyAny>>,
        spec: &Bound<'_, PyDict>,
        learner: String,
        token: Option<String>,
        actor_id: Option<String>,
        seed: Option<u64>,
        tls_ca: Option<std::path::PathBuf>,
        tls_domain: Option<String>,
        tls_cert: Option<std::path::PathBuf>,
        tls_key: Option<std::path::PathBuf>,
        max_reconnects: Option<u32>,
    ) -> PyResult<Self> {
        let spec = spec_from_dict(spec)?;
        let mut cfg = ActorConfig::new(learner, EnvConfig::CartPole, envs.len());
        if let Some(id) = actor_id {
            cfg.actor_id = id;
        }
        if let Some(seed) = seed {
            cfg.seed = seed;
        }
        cfg.token = seed_shared::Token::from_option(token.as_deref());
        cfg.reconnect.max_attempts = max_reconnects;
        let identity = match (&tls_cert, &tls_key) {
            (Some(cert), Some(key)) => Some((cert.as_path(), key.as_path())),
            (None, None) => None,
            _ => {
                return Err(PyValueError::new_err(
                    "tls_cert and tls_key go together (a client certificate and its key)",
                ))
            }
        };
        cfg.tls = match &tls_ca {
            Some(ca) => Some(
                ClientTls::from_files(ca, tls_domain, identity)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?,
            ),
            None if identity.is_some() || tls_domain.is_some() => {
                return Err(PyValueError::new_err(
                    "tls_domain, tls_cert and tls_key need tls_ca",
                ))
            }
            None => None,
        };
        cfg.validate_connection().map_err(to_py_err)?;
        let envs = envs
            .iter()
            .map(PyEnvParts::from_adapter)
            .collect::<PyResult<_>>()?;
        Ok(NativeActor {
            cfg,
            spec,
            envs,
            running: AtomicBool::new(false),
        })
    }

    /// The actor id sent in the hello.
    #[getter]
    fn actor_id(&self) -> &str {
        &self.cfg.actor_id
    }

    /// The seed of the envs' first resets.
    #[getter]
    fn seed(&self) -> u64 {
        self.cfg.seed
    }

    /// Runs until `max_steps` env steps, `max_seconds`, Ctrl-C (re-raised
    /// as `KeyboardInterrupt` after the stream is closed, with the report
    /// as its `report` attribute) or an error; see `seed_rs.Actor.run`.
    #[pyo3(signature = (max_steps=None, max_seconds=None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        max_steps: Option<u64>,
        max_seconds: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // Acquire, pairs with the Release in RunningGuard::drop.
        if self.running.swap(true, Ordering::Acquire) {
            return Err(PyRuntimeError::new_err(
                "this actor is already running (in another thread)",
            ));
        }
        let _running = RunningGuard(&self.running);
        let mut cfg = self.cfg.clone();
        cfg.max_env_steps = max_steps;
        cfg.max_seconds = max_seconds;
        cfg.validate_connection().map_err(to_py_err)?;
        let obs_desc = format!("{:?} {}", self.spec.obs_shape, self.spec.obs_dtype);
        let envs: Vec<Box<dyn Env>> = self
            .envs
            .iter()
            .enumerate()
            .map(|(i, parts)| Box::new(PyEnv::new(py, parts, i, obs_desc.clone())) as Box<dyn Env>)
            .collect();
        let spec = self.spec.clone();
        let watch = InterruptWatch::default();
        let shutdown = watch.clone().triggered();
        // The run's future (which steps the envs) runs on this thread in
        // `block_on`; the connection's I/O task (HTTP/2 framing, encoding the
        // step batches, socket reads and writes) runs on one worker thread
        // of its own. On a current-thread runtime the two took turns on the
        // Python thread, so each step batch's I/O was added to the stepping
        // time; with the worker, CartPole with 64 envs went from 0.65 to 0.9
        // of a bare Python loop's rate (benches/python/bridge_bench.py).
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("seed-rs-io")
            .enable_all()
            .build()?;
        let result =
            py.detach(move || runtime.block_on(run_actor_with_envs(cfg, spec, envs, shutdown)));
        match (result, watch.take()) {
            (Ok(report), Some(interrupt)) => {
                // What was done before Ctrl-C, for a caller that reports it.
                interrupt
                    .value(py)
                    .setattr("report", report_to_dict(py, &report)?)?;
                Err(interrupt)
            }
            (Err(_), Some(interrupt)) => Err(interrupt),
            (Ok(report), None) => report_to_dict(py, &report),
            (Err(e), None) => Err(to_py_err(e)),
        }
    }
}

/// Checks a spec dict (`seed_rs.spaces.EnvSpec.to_native()`) with the
/// learner's own rules; raises `ValueError` naming the field.
#[pyfunction]
pub fn check_spec(spec: &Bound<'_, PyDict>) -> PyResult<()> {
    spec_from_dict(spec).map(drop)
}

/// Sends the Rust actor's log lines (connects, reconnects, stops) to
/// stderr, filtered by `filter` (`RUST_LOG` syntax; default: `$RUST_LOG`,
/// else `info`), as text or JSON lines: the binaries' own set-up
/// ([`seed_shared::logging::init_logging_with`]). Returns `False` if
/// logging was already set up; a filter that does not parse is a
/// `ValueError`.
#[pyfunction]
#[pyo3(signature = (filter=None, json=false))]
pub fn enable_logging(filter: Option<&str>, json: bool) -> PyResult<bool> {
    use seed_shared::logging::{init_logging_with, LogFormat};
    let format = if json {
        LogFormat::Json
    } else {
        LogFormat::Text
    };
    init_logging_with(format, filter).map_err(PyValueError::new_err)
}

/// The [`EnvSpec`] a spec dict describes, checked as the learner checks a hello.
fn spec_from_dict(d: &Bound<'_, PyDict>) -> PyResult<EnvSpec> {
    let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        d.get_item(key)?
            .ok_or_else(|| PyValueError::new_err(format!("spec has no `{key}`")))
    };
    let obs_shape: Vec<usize> = get("obs_shape")?.extract()?;
    let obs_dtype: String = get("obs_dtype")?.extract()?;
    let obs_dtype: ObsDType = obs_dtype.parse().map_err(PyValueError::new_err)?;
    let action = match d.get_item("num_actions")? {
        Some(n) if !n.is_none() => ActionSpace::Discrete(n.extract()?),
        _ => ActionSpace::Box {
            shape: get("action_shape")?.extract()?,
            low: get("action_low")?.extract()?,
            high: get("action_high")?.extract()?,
        },
    };
    let too_big = |dims: &[usize]| dims.iter().any(|&x| x > u32::MAX as usize);
    if too_big(&obs_shape) {
        return Err(PyValueError::new_err(format!(
            "observation shape {obs_shape:?} has a dimension above 2^32-1"
        )));
    }
    if let ActionSpace::Box { shape, low, high } = &action {
        let dim: usize = shape.iter().product();
        if too_big(shape) || low.len() != dim || high.len() != dim {
            return Err(PyValueError::new_err(format!(
                "action box of shape {shape:?} needs {dim} bounds each, got {} low and {} high",
                low.len(),
                high.len()
            )));
        }
    }
    let spec = EnvSpec {
        env_name: get("env_name")?.extract()?,
        obs_shape,
        obs_dtype,
        action,
    };
    EnvSpec::from_proto(&spec.to_proto())
        .map_err(|e| PyValueError::new_err(format!("the learner would refuse this env: {e}")))?;
    Ok(spec)
}
