//! Thread pools sized before anything starts: candle's CPU pool
//! (`RAYON_NUM_THREADS`) and the tokio runtime's workers.
//!
//! Thread budget: candle's CPU pool (`--threads`), the inference threads,
//! and a small tokio runtime (`--io-threads`) for the gRPC server; on a
//! 2-core box that is one of each, leaving room for the local actors.

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// candle pool default: 1 per 4 cores, 1 to 8 (inference batches here are
/// small matmuls that do not scale past a few threads).
pub fn default_candle_threads() -> usize {
    (cores() / 4).clamp(1, 8)
}

/// Tokio worker default: 1 per 4 cores, 1 to 4.
pub fn default_io_threads() -> usize {
    (cores() / 4).clamp(1, 4)
}

/// Threads of candle's own pool for elementwise ops on 64k+ values
/// (`CANDLE_NUM_THREADS`, when the environment does not set it): one, the
/// calling thread, so no worker of that pool exists.
///
/// Why: candle 0.11 runs those ops on a barrier pool whose workers spin
/// (25,000 spins) after each op, waiting for the next; on a 2-core box
/// such a worker takes a core from the matrix products, the inference
/// threads and the gRPC server. The learner's large elementwise work is in
/// its own CPU ops (`model::cpu`, the optimizer's host step), on the rayon
/// pool. Measured (`cpu_math_bench --threads 2 --cases train`, 4
/// alternating runs each, EPYC): MinAtar 42.0k against 33.8k rows/s,
/// masked-CartPole LSTM 63.2k against 59.8k, CartPole's MLP even, the
/// Atari torso 4.95k against 5.3k (within its run-to-run spread).
pub const CANDLE_ELEMENTWISE_THREADS: usize = 1;

/// Sets candle's thread count (and, unless the environment sets it, its
/// elementwise pool's: [`CANDLE_ELEMENTWISE_THREADS`]). Must run before
/// any other thread starts (it writes the process environment) and before
/// any candle call. `RAYON_NUM_THREADS` unset makes candle re-read
/// /proc/cpuinfo on every matmul (measured: 124 us vs 2.9 us for a
/// batch-1 MLP).
pub fn configure_candle_threads(explicit: Option<usize>) -> usize {
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        std::env::set_var("CANDLE_NUM_THREADS", CANDLE_ELEMENTWISE_THREADS.to_string());
    }
    let threads = match (explicit, std::env::var("RAYON_NUM_THREADS").ok()) {
        (Some(n), _) => n.max(1),
        (None, Some(v)) => match v.parse::<usize>() {
            Ok(n) if n > 0 => return n,
            _ => default_candle_threads(),
        },
        (None, None) => default_candle_threads(),
    };
    std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    threads
}
