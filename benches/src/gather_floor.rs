//! The memory floor under `sample(128)`: what gathering the same bytes from
//! memory of the same size costs on this machine, right now, with nothing
//! else (no seqlock, no keys or weights, no sampler).
//!
//! Why: the replay figures move by 2x or more between runs on the shared
//! 2-core VMs (a bare gather measured 0.43 us and, minutes later, 2.2 us:
//! another tenant's use of the shared L3). Timed beside the buffer, in the
//! same run, the floor turns a noisy absolute figure into a ratio that
//! means something: how much the buffer adds to the memory traffic any
//! implementation must pay.
use std::time::Instant;

use rand::{Rng, SeedableRng};

/// Items in the buffer the benchmark samples from.
pub const ITEMS: usize = 100_000;
/// Bytes of one record of the 3x4 f32 layout in `StorageOrder::Records`:
/// the sequence word plus 48 bytes of data, padded to one cache line.
pub const RECORD_BYTES: usize = 64;
/// Where a record's data starts (after the sequence word).
pub const DATA_OFFSET: usize = 8;
/// Bytes gathered per item (3x4 f32).
pub const ROW_BYTES: usize = 48;
/// Rows per sample.
pub const ROWS: usize = 128;

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Record([u8; RECORD_BYTES]);

/// [`ITEMS`] records and a batch to gather [`ROWS`] of them into.
pub struct GatherFloor {
    records: Vec<Record>,
    batch: Vec<u8>,
    slots: Vec<usize>,
    rng: rand::rngs::StdRng,
}

impl GatherFloor {
    /// Allocates and first-touches the records (so timing sees no page faults).
    pub fn new() -> Self {
        let records = (0..ITEMS)
            .map(|i| Record(std::array::from_fn(|j| byte(i, j))))
            .collect();
        GatherFloor {
            records,
            batch: vec![0; ROWS * ROW_BYTES],
            slots: vec![0; ROWS],
            rng: rand::rngs::StdRng::seed_from_u64(7),
        }
    }

    /// Mean microseconds per gather of [`ROWS`] uniformly drawn records'
    /// data bytes (the bytes after the metadata words, as in a record),
    /// over `iters` gathers. Indices are drawn before the clock starts.
    pub fn gather_us(&mut self, iters: usize) -> f64 {
        let mut total = 0.0;
        for _ in 0..iters {
            for s in &mut self.slots {
                *s = self.rng.random_range(0..ITEMS);
            }
            let t = Instant::now();
            for (row, &slot) in self.slots.iter().enumerate() {
                let record = &self.records[slot].0;
                self.batch[row * ROW_BYTES..(row + 1) * ROW_BYTES]
                    .copy_from_slice(&record[DATA_OFFSET..DATA_OFFSET + ROW_BYTES]);
            }
            total += t.elapsed().as_secs_f64();
            std::hint::black_box(&self.batch);
        }
        total * 1e6 / iters as f64
    }
}

/// Byte `j` of record `i`: differs between records and positions, so a
/// gather from the wrong place shows.
fn byte(i: usize, j: usize) -> u8 {
    ((i * 7 + j) % 251) as u8
}

impl Default for GatherFloor {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_the_data_bytes_of_the_drawn_records() {
        let mut f = GatherFloor::new();
        f.gather_us(1);
        for (row, &slot) in f.slots.iter().enumerate() {
            let want: Vec<u8> = (DATA_OFFSET..DATA_OFFSET + ROW_BYTES)
                .map(|j| byte(slot, j))
                .collect();
            assert_eq!(f.batch[row * ROW_BYTES..(row + 1) * ROW_BYTES], want[..]);
        }
    }
}
