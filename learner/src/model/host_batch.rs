//! [`PolicySnapshot::forward_batch`]: one inference batch, from an
//! inference thread's gather buffers to host vectors of distribution
//! parameters, values and next recurrent state.
//!
//! Why a function of its own: it is the forward every inference thread
//! runs, and the one `cpu_math_bench` times beside PyTorch, so the
//! benchmark measures the code that serves actors.
//!
//! A batch of at most [`HOST_FORWARD_MAX_ROWS`] rows of a feed-forward
//! CPU model runs on the snapshot's [`HostForward`] (plain loops, no
//! tensors); any other uploads the observations (and state) as tensors,
//! runs [`crate::model::ActorCritic::step`] and downloads each output
//! once.
//!
//! Cost: the forward, plus (on the tensor path) one upload of the
//! observations and state and one download of each output.
use candle_core::{Device, Result, Tensor};

use crate::model::host_forward::{HostObs, HOST_FORWARD_MAX_ROWS};
use crate::model::weights::PolicySnapshot;
use crate::model::RecurrentState;

/// One batch's inputs, in host buffers.
#[derive(Debug, Clone, Copy)]
pub struct HostBatch<'a> {
    /// `[rows, ...obs_shape]` observations (at least that many).
    pub obs: HostObs<'a>,
    pub rows: usize,
    /// `[rows, H]` each: the rows' recurrent state; empty for a
    /// feed-forward model.
    pub h: &'a [f32],
    pub c: &'a [f32],
}

/// One batch's outputs, reused from batch to batch.
#[derive(Debug, Default)]
pub struct BatchOutputs {
    /// `[rows, P]`: the action distribution's parameters.
    pub params: Vec<f32>,
    /// `[rows]` state values (when asked for).
    pub values: Vec<f32>,
    /// `[rows, H]` each: the next recurrent state; empty for a
    /// feed-forward model.
    pub h: Vec<f32>,
    pub c: Vec<f32>,
    /// The host forward's layer outputs.
    scratch: Vec<f32>,
    /// `[rows, ...obs_shape]`.
    dims: Vec<usize>,
}

impl PolicySnapshot {
    /// Runs `batch` through this policy on `device` into `out` (see the
    /// module docs). Values are downloaded only when `want_values`; the
    /// host forward always writes them.
    pub fn forward_batch(
        &self,
        batch: &HostBatch<'_>,
        device: &Device,
        want_values: bool,
        out: &mut BatchOutputs,
    ) -> Result<()> {
        let rows = batch.rows;
        let hsize = self.model.state_size();
        out.h.clear();
        out.c.clear();
        let host = if hsize == 0 && rows <= HOST_FORWARD_MAX_ROWS {
            self.host_forward()
        } else {
            None
        };
        if let Some(host) = host {
            host.step(
                batch.obs,
                rows,
                &mut out.params,
                &mut out.values,
                &mut out.scratch,
            );
            return Ok(());
        }
        out.dims.clear();
        out.dims.push(rows);
        out.dims.extend(&self.model.config().obs_shape);
        let len = self.model.config().obs_len();
        let obs = match batch.obs {
            HostObs::F32(v) => Tensor::from_slice(&v[..rows * len], out.dims.as_slice(), device)?,
            HostObs::U8(v) => Tensor::from_slice(&v[..rows * len], out.dims.as_slice(), device)?,
        };
        let state = if hsize > 0 {
            Some(RecurrentState {
                h: Tensor::from_slice(&batch.h[..rows * hsize], (rows, hsize), device)?,
                c: Tensor::from_slice(&batch.c[..rows * hsize], (rows, hsize), device)?,
            })
        } else {
            None
        };
        let step = self.model.step(&obs, state.as_ref())?;
        out.params = step.policy_params.flatten_all()?.to_vec1::<f32>()?;
        out.values.clear();
        if want_values {
            out.values = step.values.to_vec1::<f32>()?;
        }
        if let Some(next) = step.state {
            out.h = next.h.flatten_all()?.to_vec1::<f32>()?;
            out.c = next.c.flatten_all()?.to_vec1::<f32>()?;
        }
        Ok(())
    }
}
