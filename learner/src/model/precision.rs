//! `--inference-dtype`: the precision of the weights inference runs with.
//!
//! Training always keeps and updates `f32` weights. With `bf16`, every
//! published snapshot is converted once (`TrainableModel::snapshot_as`) and
//! inference runs the torso, core and heads in bfloat16; the distribution
//! parameters, values and recurrent state it returns are `f32` again, so
//! sampling, the state table and the unrolls never see bf16.
//!
//! Why bf16 and not f16: the same 8-bit exponent as f32, so no overflow and
//! no loss scaling; only the mantissa is shorter (8 significant bits, a
//! relative rounding error of at most 2^-9 per operation). On a GPU's tensor
//! cores that doubles the matmul and convolution rate and halves the bytes
//! of weights and activations; on a CPU candle computes bf16 in software,
//! slower than f32, so `bf16` is for accelerators.
use std::fmt;
use std::str::FromStr;

use candle_core::DType;

/// Weights' dtype for inference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InferenceDType {
    /// The trained weights as they are.
    #[default]
    F32,
    /// A bfloat16 copy of each published snapshot.
    Bf16,
}

impl InferenceDType {
    /// The candle dtype of the inference weights.
    pub fn dtype(self) -> DType {
        match self {
            InferenceDType::F32 => DType::F32,
            InferenceDType::Bf16 => DType::BF16,
        }
    }
}

impl fmt::Display for InferenceDType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InferenceDType::F32 => "f32",
            InferenceDType::Bf16 => "bf16",
        })
    }
}

impl FromStr for InferenceDType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f32" => Ok(InferenceDType::F32),
            "bf16" => Ok(InferenceDType::Bf16),
            other => Err(format!("expected `f32` or `bf16`, got `{other}`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_prints_and_refuses_the_rest() {
        for d in [InferenceDType::F32, InferenceDType::Bf16] {
            assert_eq!(d.to_string().parse::<InferenceDType>().unwrap(), d);
        }
        assert_eq!(InferenceDType::Bf16.dtype(), DType::BF16);
        for bad in ["", "fp16", "BF16 ", "f16", "float32"] {
            let e = bad.parse::<InferenceDType>().unwrap_err();
            assert!(e.contains("`f32` or `bf16`"), "{e}");
        }
    }
}
