//! Parsing `--device`: `cpu`, or `cuda` / `cuda:N` when built with the
//! `cuda` feature.
use candle_core::Device;

use crate::error::LearnerError;

/// The candle device named by `spec`.
pub fn parse_device(spec: &str) -> Result<Device, LearnerError> {
    let err = |reason: String| LearnerError::Device {
        value: spec.to_string(),
        reason,
    };
    if spec == "cpu" {
        return Ok(Device::Cpu);
    }
    let ordinal = match spec.strip_prefix("cuda") {
        Some("") => 0,
        Some(rest) => match rest.strip_prefix(':').map(str::parse::<usize>) {
            Some(Ok(n)) => n,
            _ => return Err(err("expected `cpu`, `cuda` or `cuda:N`".into())),
        },
        None => return Err(err("expected `cpu`, `cuda` or `cuda:N`".into())),
    };
    cuda_device(ordinal).map_err(err)
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
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_names_the_feature() {
        let e = parse_device("cuda:0").unwrap_err().to_string();
        assert!(e.contains("--features cuda"), "{e}");
    }
}
