//! [`PolicySnapshot::forward_batch`]: one inference batch, from an
//! inference thread's gather buffers to host vectors of distribution
//! parameters, values and next recurrent state.
//!
//! Why a function of its own: it is the forward every inference thread
//! runs, and the one `cpu_math_bench` times beside PyTorch, so the
//! benchmark measures the code that serves actors.
//!
//! An f32 model on the CPU runs on the snapshot's [`HostForward`] (plain
//! code on the buffers, no tensors), over candle's pool
//! (`RAYON_NUM_THREADS`); any other (a GPU, a bf16 copy) uploads the
//! observations (and state) as tensors, runs
//! [`crate::model::ActorCritic::step`] and downloads each output once.
//!
//! Cost: the forward, plus on the tensor path one upload of the
//! observations and state and one download of each output.
use candle_core::{Device, Result, Tensor};

use crate::model::host_forward::{BatchOutputs, HostBatch, HostObs};
use crate::model::weights::PolicySnapshot;
use crate::model::RecurrentState;

impl PolicySnapshot {
    /// Runs `batch` through this policy on `device` into `out` (see the
    /// module docs). On the tensor path values are downloaded only when
    /// `want_values`; the host forward always writes them.
    pub fn forward_batch(
        &self,
        batch: &HostBatch<'_>,
        device: &Device,
        want_values: bool,
        out: &mut BatchOutputs,
    ) -> Result<()> {
        if let Some(host) = self.host_forward().filter(|_| device.is_cpu()) {
            return host.step(batch, out, crate::model::cpu::pool_threads());
        }
        self.forward_tensors(batch, device, want_values, out)
    }

    /// The tensor path of [`PolicySnapshot::forward_batch`].
    fn forward_tensors(
        &self,
        batch: &HostBatch<'_>,
        device: &Device,
        want_values: bool,
        out: &mut BatchOutputs,
    ) -> Result<()> {
        let rows = batch.rows;
        let hsize = self.model.state_size();
        let mut dims = vec![rows];
        dims.extend(&self.model.config().obs_shape);
        let len = self.model.config().obs_len();
        let obs = match batch.obs {
            HostObs::F32(v) => Tensor::from_slice(&v[..rows * len], dims.as_slice(), device)?,
            HostObs::U8(v) => Tensor::from_slice(&v[..rows * len], dims.as_slice(), device)?,
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
        out.h.clear();
        out.c.clear();
        if let Some(next) = step.state {
            out.h = next.h.flatten_all()?.to_vec1::<f32>()?;
            out.c = next.c.flatten_all()?.to_vec1::<f32>()?;
        }
        Ok(())
    }
}
