//! [`PyEnv`]: a [`seed_env::Env`] over a Python (Gymnasium) env.
//!
//! The actor's pool calls `reset` and `step` per env; each call takes the GIL
//! for its duration (the actor runs with the GIL released between calls,
//! see [`native_actor`](crate::native_actor)), calls the env's bound
//! `reset`/`step`, and writes the observation into the caller's row.
//!
//! # Observations
//!
//! The row gets the observation's bytes in the wire dtype and layout. When
//! the env's observation space already has the wire dtype and layout (a
//! float32 or uint8 `Box`), the Python side hands over that dtype as
//! `fast_dtype`: an observation that is an ndarray of exactly that dtype is
//! read with one `tobytes()` call and copied into the row (one memcpy, no
//! per-element work in Python or Rust). Anything else (float64, bool, an
//! HWC image to transpose, a list) goes through the adapter's `to_bytes`,
//! which converts it with numpy once per step.
//!
//! Why `tobytes()` and not the buffer protocol: the module is built for
//! CPython's stable ABI from 3.9 (one wheel for every version), and the
//! buffer protocol entered the stable ABI only in 3.11. `tobytes()` costs
//! one extra copy of the observation, a few nanoseconds for CartPole's 16
//! bytes and about a microsecond for a 28 KB Atari stack, next to an env
//! step of microseconds to milliseconds.
//!
//! # Errors
//!
//! Any exception the env raises (or a malformed return value, reported as a
//! `TypeError`/`ValueError`) becomes an [`EnvError`] that carries the
//! `PyErr`; [`to_py_err`](crate::error::to_py_err) re-raises it unchanged.
//!
//! # Cost
//!
//! Per step: one GIL acquisition and release, the env's `step` call, four
//! tuple reads, a `dtype` attribute read and a `tobytes()` call; a
//! continuous action adds one `bytes` object and the adapter's
//! `make_action` call. No Rust allocation per step.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use pyo3::{intern, Py, PyAny};
use seed_env::{Action, Env, EnvError, Transition};

/// What the Python side hands over for one env (a `seed_rs.gym_actor`
/// `EnvAdapter`), read once when the actor is built.
pub struct PyEnvParts {
    /// The env's bound `reset`.
    reset: Py<PyAny>,
    /// The env's bound `step`.
    step: Py<PyAny>,
    /// Observations that are ndarrays of exactly this dtype are already in
    /// the wire dtype and layout; `None`: always convert.
    fast_dtype: Option<Py<PyAny>>,
    /// `to_bytes(obs) -> bytes`: the observation in the wire dtype and layout.
    to_bytes: Py<PyAny>,
    /// `make_action(bytes) -> action`: continuous spaces only; the bytes are
    /// the action's little-endian f32s.
    make_action: Option<Py<PyAny>>,
}

impl PyEnvParts {
    /// Reads the adapter's attributes.
    pub fn from_adapter(adapter: &Bound<'_, PyAny>) -> PyResult<Self> {
        let optional = |name: &str| -> PyResult<Option<Py<PyAny>>> {
            let value = adapter.getattr(name)?;
            Ok((!value.is_none()).then(|| value.unbind()))
        };
        Ok(PyEnvParts {
            reset: adapter.getattr("reset")?.unbind(),
            step: adapter.getattr("step")?.unbind(),
            fast_dtype: optional("fast_dtype")?,
            to_bytes: adapter.getattr("to_bytes")?.unbind(),
            make_action: optional("make_action")?,
        })
    }

    fn clone_ref(&self, py: Python<'_>) -> Self {
        PyEnvParts {
            reset: self.reset.clone_ref(py),
            step: self.step.clone_ref(py),
            fast_dtype: self.fast_dtype.as_ref().map(|d| d.clone_ref(py)),
            to_bytes: self.to_bytes.clone_ref(py),
            make_action: self.make_action.as_ref().map(|m| m.clone_ref(py)),
        }
    }
}

/// One Python env as a [`seed_env::Env`].
pub struct PyEnv {
    parts: PyEnvParts,
    /// Position in the actor, for error messages.
    index: usize,
    /// The spec's observation, for error messages: `[4] f32`.
    obs_desc: String,
    /// The first reset passes the seed; later ones continue the env's RNG
    /// (Gymnasium's convention; reseeding builds a new generator per episode).
    seeded: bool,
    /// One continuous action as little-endian f32 bytes, reused.
    action_bytes: Vec<u8>,
}

impl PyEnv {
    pub fn new(py: Python<'_>, parts: &PyEnvParts, index: usize, obs_desc: String) -> Self {
        PyEnv {
            parts: parts.clone_ref(py),
            index,
            obs_desc,
            seeded: false,
            action_bytes: Vec::new(),
        }
    }

    fn reset_in(&mut self, py: Python<'_>, seed: u64, obs: &mut [u8]) -> PyResult<()> {
        let reset = self.parts.reset.bind(py);
        let result = if self.seeded {
            reset.call0()?
        } else {
            let kwargs = PyDict::new(py);
            // Many envs seed numpy's legacy RandomState, which takes 32 bits.
            kwargs.set_item(intern!(py, "seed"), seed & 0xffff_ffff)?;
            let result = reset.call((), Some(&kwargs))?;
            self.seeded = true;
            result
        };
        let result = self.tuple_of(result, 2, "reset", "(obs, info)")?;
        self.write_obs(py, &result.get_item(0)?, obs)
    }

    fn step_in(
        &mut self,
        py: Python<'_>,
        action: Action<'_>,
        obs: &mut [u8],
    ) -> PyResult<Transition> {
        let step = self.parts.step.bind(py);
        let result = match action {
            Action::Discrete(a) => step.call1((a,))?,
            Action::Continuous(values) => {
                let Some(make_action) = &self.parts.make_action else {
                    return Err(PyTypeError::new_err(
                        "a continuous action for an env with a discrete action space",
                    ));
                };
                self.action_bytes.clear();
                for v in values {
                    self.action_bytes.extend_from_slice(&v.to_le_bytes());
                }
                let bytes = PyBytes::new(py, &self.action_bytes);
                step.call1((make_action.bind(py).call1((bytes,))?,))?
            }
        };
        let result = self.tuple_of(
            result,
            5,
            "step",
            "(obs, reward, terminated, truncated, info)",
        )?;
        self.write_obs(py, &result.get_item(0)?, obs)?;
        let reward = result.get_item(1)?;
        let reward: f64 = reward.extract().map_err(|_: PyErr| {
            let got = reward.repr().map_or_else(|_| "?".into(), |r| r.to_string());
            PyTypeError::new_err(format!(
                "env {}: step returned a reward that is not a number: {got}",
                self.index
            ))
        })?;
        Ok(Transition {
            reward: reward as f32,
            terminated: result.get_item(2)?.is_truthy()?,
            truncated: result.get_item(3)?.is_truthy()?,
        })
    }

    /// `value` as a tuple of `len` items, else a `TypeError` naming the call.
    fn tuple_of<'py>(
        &self,
        value: Bound<'py, PyAny>,
        len: usize,
        call: &str,
        shape: &str,
    ) -> PyResult<Bound<'py, PyTuple>> {
        match value.cast_into::<PyTuple>() {
            Ok(t) if t.len() == len => Ok(t),
            Ok(t) => Err(PyTypeError::new_err(format!(
                "env {}: {call} returned a tuple of {} items, expected {shape} \
                 (the Gymnasium >= 0.26 API)",
                self.index,
                t.len()
            ))),
            Err(e) => Err(PyTypeError::new_err(format!(
                "env {}: {call} returned {}, expected a tuple {shape}",
                self.index,
                e.into_inner().get_type().name()?
            ))),
        }
    }

    /// Writes `value`'s bytes in the wire dtype and layout into `out`.
    fn write_obs(&self, py: Python<'_>, value: &Bound<'_, PyAny>, out: &mut [u8]) -> PyResult<()> {
        let fast = self.parts.fast_dtype.as_ref().is_some_and(|dtype| {
            value
                .getattr(intern!(py, "dtype"))
                .is_ok_and(|d| d.is(dtype))
        });
        let bytes = if fast {
            value.call_method0(intern!(py, "tobytes"))?
        } else {
            self.parts.to_bytes.bind(py).call1((value,))?
        };
        let bytes = bytes
            .cast_into::<PyBytes>()
            .map_err(|_| PyTypeError::new_err("to_bytes must return bytes"))?;
        let src = bytes.as_bytes();
        if src.len() != out.len() {
            return Err(PyValueError::new_err(format!(
                "env {}: an observation of {} bytes, but the observation space says {} \
                 ({} bytes): does the env return observations of another shape than its \
                 observation_space?",
                self.index,
                src.len(),
                self.obs_desc,
                out.len()
            )));
        }
        out.copy_from_slice(src);
        Ok(())
    }
}

impl Env for PyEnv {
    fn reset(&mut self, seed: u64, obs: &mut [u8]) -> Result<(), EnvError> {
        Python::attach(|py| self.reset_in(py, seed, obs)).map_err(EnvError::new)
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [u8]) -> Result<Transition, EnvError> {
        Python::attach(|py| self.step_in(py, action, obs)).map_err(EnvError::new)
    }
}
