//! `--device`: `cpu`, or `cuda` / `cuda:N` when built with the `cuda`
//! feature. [`DeviceSpec`] is the parsed name (checked at the edge, compared
//! in configs); [`DeviceSpec::open`] makes the candle device when the learner
//! starts, which is where a missing GPU or driver shows.
use std::fmt;
use std::str::FromStr;

use candle_core::Device;

use crate::error::LearnerError;

/// A device by name: what `--device` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceSpec {
    /// The host CPU (candle's thread pool).
    #[default]
    Cpu,
    /// CUDA device `N`.
    Cuda(usize),
}

impl FromStr for DeviceSpec {
    type Err = LearnerError;

    fn from_str(spec: &str) -> Result<Self, LearnerError> {
        if spec == "cpu" {
            return Ok(DeviceSpec::Cpu);
        }
        let syntax = || LearnerError::Device {
            value: spec.to_string(),
            reason: "expected `cpu`, `cuda` or `cuda:N`".into(),
        };
        match spec.strip_prefix("cuda") {
            Some("") => Ok(DeviceSpec::Cuda(0)),
            Some(rest) => match rest.strip_prefix(':').map(str::parse::<usize>) {
                Some(Ok(n)) => Ok(DeviceSpec::Cuda(n)),
                _ => Err(syntax()),
            },
            None => Err(syntax()),
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Cpu => f.write_str("cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl DeviceSpec {
    /// Opens the device: fails for CUDA without the `cuda` feature, or when
    /// the GPU or its driver is missing.
    pub fn open(&self) -> Result<Device, LearnerError> {
        match *self {
            DeviceSpec::Cpu => Ok(Device::Cpu),
            DeviceSpec::Cuda(ordinal) => {
                cuda_device(ordinal).map_err(|reason| LearnerError::Device {
                    value: self.to_string(),
                    reason,
                })
            }
        }
    }
}

/// The candle device named by `spec` (parse, then open).
pub fn parse_device(spec: &str) -> Result<Device, LearnerError> {
    spec.parse::<DeviceSpec>()?.open()
}

#[cfg(feature = "cuda")]
fn cuda_device(ordinal: usize) -> Result<Device, String> {
    Device::new_cuda(ordinal).map_err(|e| {
        format!(
            "could not open CUDA device {ordinal} ({e}); this build has the `cuda` feature, so \
             the likely cause is no NVIDIA GPU with that ordinal, a driver older than CUDA 13 \
             (check `nvidia-smi`), or CUDA_VISIBLE_DEVICES hiding it; use `--device cpu` to run \
             without a GPU"
        )
    })
}

#[cfg(not(feature = "cuda"))]
fn cuda_device(_ordinal: usize) -> Result<Device, String> {
    Err("this learner was built without CUDA; rebuild with `--features cuda`".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_parses_and_garbage_is_named() {
        assert!(parse_device("cpu").is_ok());
        let e = parse_device("tpu").unwrap_err().to_string();
        assert!(e.contains("--device tpu"), "{e}");
        assert!(parse_device("cuda:x").is_err());
        assert_eq!("cuda:3".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(3));
        assert_eq!("cuda".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(0));
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_names_the_feature() {
        let e = parse_device("cuda:0").unwrap_err().to_string();
        assert!(e.contains("--features cuda"), "{e}");
    }
}
