//! [`OptimizerError`]: what building, stepping or restoring an optimizer can fail with.
use candle_core::Shape;

/// Errors from building, stepping or restoring an [`Optimizer`].
#[derive(Debug, thiserror::Error)]
pub enum OptimizerError {
    /// A tensor operation failed.
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// The `VarMap`'s lock was poisoned by a panic elsewhere.
    #[error("the VarMap lock is poisoned")]
    PoisonedVarMap,
    /// A state entry this optimizer needs is absent.
    #[error("optimizer state has no entry {key:?}")]
    MissingState {
        /// The absent key.
        key: String,
    },
    /// A state entry's shape does not match its variable.
    #[error("optimizer state {key:?} has shape {got:?}, its variable needs {expected:?}")]
    StateShapeMismatch {
        /// The offending key.
        key: String,
        /// The variable's shape.
        expected: Shape,
        /// The stored shape.
        got: Shape,
    },
    /// The stored step count is not a non-negative integer.
    #[error("optimizer state {key:?} is not a valid step count")]
    InvalidStepCount {
        /// The offending key.
        key: String,
    },
    /// `clip_grad_norm` needs a positive, finite maximum.
    #[error("max_norm must be positive and finite, got {max_norm}")]
    InvalidMaxNorm {
        /// The rejected value.
        max_norm: f32,
    },
    /// The flat buffers need every variable on one device with one dtype.
    #[error("variable {name:?} is {got}, the first one {expected}: all variables must share a device and dtype")]
    MixedVariables {
        /// The variable that differs.
        name: String,
        /// Device and dtype of the first variable.
        expected: String,
        /// Device and dtype of this one.
        got: String,
    },
}
