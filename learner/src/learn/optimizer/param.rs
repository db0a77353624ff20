//! [`Param`]: one variable the optimizer trains and where it lives in the
//! flat buffers of moments. Its own file because both the tensor step
//! (`update`) and the host step (`host_update`) read it, and neither
//! imports the other's step.
use candle_core::Var;

/// One trained variable: its name in the `VarMap`, the variable, and its
/// range in the flat buffers.
#[derive(Debug)]
pub(super) struct Param {
    pub(super) name: String,
    pub(super) var: Var,
    pub(super) offset: usize,
    pub(super) len: usize,
}
