//! [`Machine`]: which host a result came from (CPU model, cores, kernel), so
//! every JSON the harness writes carries its provenance.
use serde::Serialize;

/// Where the figures were measured.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// `model name` of the first CPU in /proc/cpuinfo ("unknown" elsewhere).
    pub cpu: String,
    /// Cores this process may use.
    pub cores: usize,
    /// Kernel release (`uname -r`), "unknown" if unreadable.
    pub kernel: String,
}

impl Machine {
    pub fn detect() -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".into());
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel,
        }
    }
}

impl std::fmt::Display for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({} cores, Linux {})",
            self.cpu, self.cores, self.kernel
        )
    }
}
