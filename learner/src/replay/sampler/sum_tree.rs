//! [`SumTree`]: a 16-ary sum/min tree over slot priorities, laid out for the
//! cache.
//!
//! Why 16-ary: with 1M leaves a binary tree is 20 levels, each a likely cache
//! miss; 16 children of `f64` are two cache lines scanned linearly, and the
//! tree is 5 levels above the leaves. Levels are separate flat arrays (bottom
//! up), children of node `i` are `16i..16i+16` of the level below. Batches
//! are processed level by level so the misses of different queries overlap.
//! Sums are `f64` and recomputed from the children on update (no drift).
//! Cost: update `O(16 log16 N)`, prefix search `O(16 log16 N)`, memory about
//! `1.07 * 16 * N` bytes (sum and min per node).
const K: usize = 16;

#[derive(Debug, Clone)]
struct Level {
    sum: Vec<f64>,
    /// Minimum positive value below the node (`INFINITY` if none); empty at
    /// the leaf level, where it follows from `sum`.
    min: Vec<f64>,
}

/// Sum and minimum-positive-value tree over `len` leaves.
#[derive(Debug, Clone)]
pub(crate) struct SumTree {
    len: usize,
    /// `levels[0]` holds the leaves; the last level holds one node, the root.
    levels: Vec<Level>,
}

/// Where a prefix-sum search landed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Found {
    pub leaf: usize,
    pub value: f64,
}

impl SumTree {
    pub(crate) fn new(len: usize) -> Self {
        let mut levels = Vec::new();
        let mut n = len.max(1).next_multiple_of(K);
        loop {
            let min_len = if levels.is_empty() { 0 } else { n };
            levels.push(Level {
                sum: vec![0.0; n],
                min: vec![f64::INFINITY; min_len],
            });
            if n == 1 {
                break;
            }
            n = n.div_ceil(K);
            if n > 1 {
                n = n.next_multiple_of(K);
            }
        }
        SumTree { len, levels }
    }

    /// Sum of all leaves.
    pub(crate) fn total(&self) -> f64 {
        self.levels.last().map_or(0.0, |l| l.sum[0])
    }

    /// Smallest positive leaf (`INFINITY` when all are zero).
    pub(crate) fn min_positive(&self) -> f64 {
        self.levels.last().map_or(f64::INFINITY, |l| l.min[0])
    }

    pub(crate) fn get(&self, leaf: usize) -> f64 {
        self.levels[0].sum[leaf]
    }

    /// Sets leaves (`value >= 0`, finite) and refreshes their ancestors,
    /// level by level.
    pub(crate) fn set_many(&mut self, updates: impl IntoIterator<Item = (usize, f64)>, scratch: &mut Vec<usize>) {
        scratch.clear();
        for (leaf, value) in updates {
            if leaf < self.len {
                self.levels[0].sum[leaf] = value;
                scratch.push(leaf / K);
            }
        }
        for lvl in 1..self.levels.len() {
            let (below, above) = self.levels.split_at_mut(lvl);
            let (child, node) = (&below[lvl - 1], &mut above[0]);
            for p in scratch.iter_mut() {
                let base = *p * K;
                let sums = &child.sum[base..base + K];
                let sum: f64 = sums.iter().sum();
                let min = if lvl == 1 {
                    sums.iter()
                        .fold(f64::INFINITY, |a, &b| if b > 0.0 { a.min(b) } else { a })
                } else {
                    child.min[base..base + K].iter().fold(f64::INFINITY, |a, &b| a.min(b))
                };
                node.sum[*p] = sum;
                node.min[*p] = min;
                *p /= K;
            }
        }
    }

    /// For each prefix mass in `targets` (each in `[0, total)`), the leaf
    /// whose cumulative range contains it. Never returns a zero leaf while
    /// the total is positive.
    pub(crate) fn find_many(&self, targets: &mut [f64], nodes: &mut Vec<usize>, out: &mut Vec<Found>) {
        nodes.clear();
        nodes.resize(targets.len(), 0);
        for lvl in (0..self.levels.len() - 1).rev() {
            let child = &self.levels[lvl].sum;
            for (node, t) in nodes.iter_mut().zip(targets.iter_mut()) {
                let base = *node * K;
                // Branch-free scan (the exit branch of a linear search
                // mispredicts once per level): count the children whose
                // cumulative mass is <= t; that count is the chosen child.
                let mut acc = 0.0;
                let mut before = 0.0;
                let mut idx = 0usize;
                let mut last_positive = 0usize;
                for (c, &s) in child[base..base + K].iter().enumerate() {
                    acc += s;
                    let passed = acc <= *t;
                    idx += usize::from(passed);
                    before = if passed { acc } else { before };
                    last_positive = if s > 0.0 { c } else { last_positive };
                }
                if idx < K && child[base + idx] > 0.0 {
                    *t -= before;
                    *node = base + idx;
                } else {
                    // Rounding left `t` past the last child: take the last
                    // positive one, and keep `t` past the end so every lower
                    // level does the same (the last positive leaf overall).
                    *t = f64::INFINITY;
                    *node = base + last_positive;
                }
            }
        }
        out.clear();
        out.extend(nodes.iter().map(|&leaf| Found {
            leaf,
            value: self.levels[0].sum[leaf],
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_mins_and_search_match_a_linear_scan() {
        let n = 1000;
        let mut t = SumTree::new(n);
        let mut scratch = Vec::new();
        let vals: Vec<f64> = (0..n).map(|i| ((i * 7919) % 13) as f64 * 0.5).collect();
        t.set_many(vals.iter().copied().enumerate(), &mut scratch);
        let total: f64 = vals.iter().sum();
        assert!((t.total() - total).abs() < 1e-9);
        let min = vals.iter().copied().filter(|&v| v > 0.0).fold(f64::INFINITY, f64::min);
        assert_eq!(t.min_positive(), min);
        let mut targets: Vec<f64> = (0..50).map(|i| total * i as f64 / 50.0).collect();
        let expected: Vec<usize> = targets
            .iter()
            .map(|&m| {
                let mut acc = 0.0;
                vals.iter()
                    .position(|&v| {
                        acc += v;
                        m < acc
                    })
                    .unwrap()
            })
            .collect();
        let (mut nodes, mut out) = (Vec::new(), Vec::new());
        t.find_many(&mut targets, &mut nodes, &mut out);
        let got: Vec<usize> = out.iter().map(|f| f.leaf).collect();
        assert_eq!(got, expected);
        assert!(out.iter().all(|f| f.value > 0.0));
        // Past the end lands on the last positive leaf.
        let mut over = [total * 2.0];
        t.find_many(&mut over, &mut nodes, &mut out);
        assert_eq!(out[0].leaf, vals.iter().rposition(|&v| v > 0.0).unwrap());
        // Zeroing a leaf updates sums and the min.
        t.set_many([(out[0].leaf, 0.0)], &mut scratch);
        assert!((t.total() - (total - vals[out[0].leaf])).abs() < 1e-9);
    }
}
