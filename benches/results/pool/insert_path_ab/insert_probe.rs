//! Probe (not committed): inserts of batch R into a full 100k 3x4 f32 table.
use seed_replay::{DType, FieldRef, ItemLayout, ReplayBuffer, ReplayConfig, SamplerConfig, Values};
use std::time::Instant;

#[inline(never)]
fn run(b: &ReplayBuffer, fields: &[FieldRef<'_>], rows: usize, calls: usize) {
    for _ in 0..calls {
        b.insert_batch(fields, rows).unwrap();
    }
}

fn main() {
    let rows: usize = std::env::args().nth(1).unwrap().parse().unwrap();
    let items: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    let layout = ItemLayout::builder().field("x", DType::F32, &[3, 4]).build().unwrap();
    let b = ReplayBuffer::new(layout, ReplayConfig::new(100_000, SamplerConfig::Uniform)).unwrap();
    let xs: Vec<f32> = (0..1000 * 12).map(|i| i as f32).collect();
    let shape = [1000usize, 3, 4];
    let f = [FieldRef::new(&shape, Values::F32(&xs))];
    for _ in 0..100 { b.insert_batch(&f, 1000).unwrap(); }
    let xs: Vec<f32> = (0..rows * 12).map(|i| i as f32).collect();
    let shape = [rows, 3, 4];
    let fields = [FieldRef::new(&shape, Values::F32(&xs))];
    let calls = (items / rows).max(1);
    let t = Instant::now();
    run(&b, &fields, rows, calls);
    let dt = t.elapsed().as_secs_f64();
    println!("{}", (calls * rows) as f64 / dt);
}
