//! `NativePolicy`: a checkpoint's policy in process ([`seed_learner::app::policy::Policy`],
//! the learner's own model code on the CPU), for `seed_rs.Policy`.
//!
//! This half takes observations already in the learner's layout (C-order
//! `float32` or `uint8` arrays `[B, ...obs_shape]`) and recurrent state as
//! `float32` `[B, H]` arrays; the Python half (`seed_rs/policy.py`) turns
//! an env's observations into that (casts, bools to 0/255, channels-last
//! frames transposed) and names what it refuses. The forward runs with the
//! GIL released.
//!
//! Errors: a checkpoint that is missing is a `FileNotFoundError`; one that
//! is corrupt, foreign or from another version, and inputs that do not fit,
//! are `ValueError`s; each message names the file or the input.
//!
//! Cost: one forward per call, plus one copy of the outputs into new numpy
//! arrays.
use std::path::PathBuf;

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray2, PyUntypedArray};
use pyo3::exceptions::{PyFileNotFoundError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use seed_learner::app::policy::{
    Actions, LstmState, Observations, Policy, PolicyError, PolicyHead, PolicyOutput,
};
use seed_learner::learn::checkpoint::CheckpointError;
use seed_learner::model::distribution::{LOG_STD_MAX, LOG_STD_MIN};
use seed_shared::{ActionSpace, ObsDType};

fn to_py_err(e: PolicyError) -> PyErr {
    match e {
        PolicyError::Checkpoint(CheckpointError::Missing(_)) => {
            PyFileNotFoundError::new_err(e.to_string())
        }
        PolicyError::Checkpoint(CheckpointError::Io { ref source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            PyFileNotFoundError::new_err(e.to_string())
        }
        other => PyValueError::new_err(other.to_string()),
    }
}

/// A trained policy loaded from a run directory or a checkpoint directory
/// (use `seed_rs.Policy`, which takes env observations).
#[pyclass(name = "NativePolicy", module = "seed_rs._native")]
pub struct NativePolicy {
    policy: Policy,
}

/// `state`'s two arrays as one [`LstmState`], or `None`.
fn lstm_state(
    h: Option<PyReadonlyArray2<'_, f32>>,
    c: Option<PyReadonlyArray2<'_, f32>>,
) -> PyResult<Option<LstmState>> {
    match (h, c) {
        (None, None) => Ok(None),
        (Some(h), Some(c)) => Ok(Some(LstmState {
            h: h.as_slice()
                .map_err(|e| PyValueError::new_err(format!("state h: {e}")))?
                .to_vec(),
            c: c.as_slice()
                .map_err(|e| PyValueError::new_err(format!("state c: {e}")))?
                .to_vec(),
        })),
        _ => Err(PyValueError::new_err(
            "state: give both h and c, or neither",
        )),
    }
}

/// `obs` as a read-only array of `T` (`dtype` names it in the error).
fn readonly<'py, T: numpy::Element>(
    obs: &Bound<'py, PyUntypedArray>,
    dtype: &str,
) -> PyResult<numpy::PyReadonlyArrayDyn<'py, T>> {
    let array = obs
        .cast::<numpy::PyArrayDyn<T>>()
        .map_err(|_| PyValueError::new_err(format!("observations: expected a {dtype} array")))?;
    Ok(array.readonly())
}

/// The array's elements, which must be C-contiguous.
fn contiguous<'a, T: numpy::Element>(a: &'a numpy::PyReadonlyArrayDyn<'_, T>) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|e| PyValueError::new_err(format!("observations: {e}")))
}

impl NativePolicy {
    fn run(
        &self,
        py: Python<'_>,
        obs: &Bound<'_, PyUntypedArray>,
        state: Option<LstmState>,
    ) -> PyResult<PolicyOutput> {
        let policy = &self.policy;
        let state = state.as_ref();
        match policy.spec().obs_dtype {
            ObsDType::F32 => {
                let a = readonly::<f32>(obs, "float32")?;
                let x = contiguous(&a)?;
                py.detach(|| policy.forward(Observations::F32(x), state))
            }
            ObsDType::U8 => {
                let a = readonly::<u8>(obs, "uint8")?;
                let x = contiguous(&a)?;
                py.detach(|| policy.forward(Observations::U8(x), state))
            }
        }
        .map_err(to_py_err)
    }
}

type Outputs<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>,
);

/// `(params [B, P], values [B], (h, c) or None)` as new arrays.
fn outputs<'py>(py: Python<'py>, out: &PolicyOutput) -> PyResult<Outputs<'py>> {
    let rows = out.rows;
    let width = out.params.len() / rows.max(1);
    let params = PyArray1::from_slice(py, &out.params).reshape([rows, width])?;
    let values = PyArray1::from_slice(py, &out.values).into_any();
    let state = match &out.state {
        None => None,
        Some(s) => {
            let h = s.h.len() / rows.max(1);
            let hs: Bound<'py, PyArray2<f32>> =
                PyArray1::from_slice(py, &s.h).reshape([rows, h])?;
            let cs: Bound<'py, PyArray2<f32>> =
                PyArray1::from_slice(py, &s.c).reshape([rows, h])?;
            Some((hs.into_any(), cs.into_any()))
        }
    };
    Ok((params.into_any(), values, state))
}

#[pymethods]
impl NativePolicy {
    /// Loads the policy at `path` (a run directory: its newest checkpoint;
    /// or a checkpoint directory).
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let policy = py.detach(|| Policy::load(&path)).map_err(to_py_err)?;
        Ok(NativePolicy { policy })
    }

    /// What the policy is: its env spec, model, head and checkpoint (a dict).
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = &self.policy;
        let d = PyDict::new(py);
        let spec = p.spec();
        d.set_item("env_name", &spec.env_name)?;
        d.set_item("env_kind", &p.env().kind)?;
        d.set_item("obs_shape", spec.obs_shape.clone())?;
        d.set_item("obs_dtype", spec.obs_dtype.to_string())?;
        match &spec.action {
            ActionSpace::Discrete(n) => d.set_item("num_actions", *n)?,
            ActionSpace::Box { shape, low, high } => {
                d.set_item("action_shape", shape.clone())?;
                d.set_item("action_low", low.clone())?;
                d.set_item("action_high", high.clone())?;
            }
        }
        let m = p.model_config();
        d.set_item("hidden_sizes", m.hidden_sizes.clone())?;
        d.set_item("conv_features", m.conv_features)?;
        d.set_item("lstm_size", m.lstm_size)?;
        d.set_item("obs_is_u8", m.obs_is_u8)?;
        d.set_item("conv_layers", p.conv_layers())?;
        d.set_item("log_std_range", (LOG_STD_MIN, LOG_STD_MAX))?;
        d.set_item(
            "head",
            match p.head() {
                PolicyHead::Distribution => "distribution",
                PolicyHead::QValues => "q_values",
            },
        )?;
        let s = p.state();
        d.set_item("policy_version", s.policy_version)?;
        d.set_item("learner_steps", s.learner_steps)?;
        d.set_item("env_steps", s.env_steps)?;
        d.set_item("checkpoint", p.dir())?;
        d.set_item("flags_json", p.flags().to_string())?;
        Ok(d)
    }

    /// Restarts the action sampler from `seed`.
    fn seed(&mut self, seed: u64) {
        self.policy.seed(seed);
    }

    /// One forward pass: `(params, values, state)`; `state` is `(h, c)` for
    /// a recurrent policy, else `None`.
    #[pyo3(signature = (obs, h=None, c=None))]
    fn forward<'py>(
        &self,
        py: Python<'py>,
        obs: &Bound<'py, PyUntypedArray>,
        h: Option<PyReadonlyArray2<'py, f32>>,
        c: Option<PyReadonlyArray2<'py, f32>>,
    ) -> PyResult<Outputs<'py>> {
        let out = self.run(py, obs, lstm_state(h, c)?)?;
        outputs(py, &out)
    }

    /// Actions for a batch: `(actions, values, state)`; discrete actions
    /// are `int64` `[B]`, continuous ones `float32` `[B, D]` within the
    /// env's bounds.
    #[pyo3(signature = (obs, greedy, h=None, c=None))]
    fn act<'py>(
        &mut self,
        py: Python<'py>,
        obs: &Bound<'py, PyUntypedArray>,
        greedy: bool,
        h: Option<PyReadonlyArray2<'py, f32>>,
        c: Option<PyReadonlyArray2<'py, f32>>,
    ) -> PyResult<Outputs<'py>> {
        let out = self.run(py, obs, lstm_state(h, c)?)?;
        let actions = match self.policy.actions(&out, greedy) {
            Actions::Discrete(a) => {
                PyArray1::from_iter(py, a.into_iter().map(i64::from)).into_any()
            }
            Actions::Continuous(a) => {
                let dim = a.len() / out.rows.max(1);
                PyArray1::from_vec(py, a)
                    .reshape([out.rows, dim])?
                    .into_any()
            }
        };
        let (_, values, state) = outputs(py, &out)?;
        Ok((actions, values, state))
    }

    /// The checkpoint's weights by name, `float32` arrays in PyTorch's
    /// layouts (`[out, in]` matrices, `[out, in, k, k]` kernels, LSTM gates
    /// `i, f, g, o`).
    fn weights<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let weights = self.policy.weights().map_err(to_py_err)?;
        for (name, (shape, values)) in weights {
            d.set_item(name, PyArray1::from_vec(py, values).reshape(shape)?)?;
        }
        Ok(d)
    }
}
