//! The TorchRL replay-buffer RFC's workload, shared by the criterion bench
//! (`benches/benches/replay.rs`) and `replay_bench`, so the two always
//! measure the same items: a 3x4 f32 item, and a dict item
//! `{a: 3x4 f32, b: 3x4 f32, c: bool}`.
use seed_replay::{DType, FieldRef, ItemLayout, ReplayBuffer, ReplayError, Values};

/// Items of one field `x`: 3x4 f32.
pub fn layout_3x4() -> Result<ItemLayout, ReplayError> {
    ItemLayout::builder()
        .field("x", DType::F32, &[3, 4])
        .build()
}

/// Items `{a: 3x4 f32, b: 3x4 f32, c: bool}`.
pub fn layout_dict() -> Result<ItemLayout, ReplayError> {
    ItemLayout::builder()
        .field("a", DType::F32, &[3, 4])
        .field("b", DType::F32, &[3, 4])
        .field("c", DType::Bool, &[])
        .build()
}

/// Fills `b` (either layout above) with `n` items in batches of 1000, so the
/// memory is first-touched before anything is timed.
pub fn fill(b: &ReplayBuffer, n: usize) -> Result<(), ReplayError> {
    let rows = 1000usize;
    let xs: Vec<f32> = (0..rows * 12).map(|i| i as f32).collect();
    let cs: Vec<bool> = (0..rows).map(|i| i % 2 == 0).collect();
    let mut left = n;
    while left > 0 {
        let r = left.min(rows);
        let shape = [r, 3, 4];
        let x = FieldRef::new(&shape, Values::F32(&xs[..r * 12]));
        let fields: Vec<FieldRef<'_>> = if b.layout().fields().len() == 1 {
            vec![x]
        } else {
            vec![x, x, FieldRef::new(&shape[..1], Values::Bool(&cs[..r]))]
        };
        b.insert_batch(&fields, r)?;
        left -= r;
    }
    Ok(())
}
