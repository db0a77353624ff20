//! [`SumTree`]: an 8-ary sum/min tree over slot priorities, laid out for the
//! cache.
//!
//! Why 8-ary: with 1M leaves a binary tree is 20 levels, each a likely cache
//! miss; 8 children of `f64` fill exactly one cache line, 8 `f32` leaves half
//! of one, and the tree is 7 levels. (16-ary measured no faster: two lines
//! per internal node and longer add chains per level.) Levels are separate
//! flat arrays, bottom up; children of node `i` are `8i..8i+8` of the level
//! below. A batch of searches runs level by level so the misses of different
//! queries overlap. Updates move sums by the delta (one add per level) and
//! recompute mins only where they can change; an exact rebuild after every
//! `len` updates bounds floating-point drift (amortised O(1), but that one
//! call takes O(N): about a millisecond at 1M leaves).
//! Cost: update and search O(log8 N) lines touched; memory about
//! `4 N + 16 N / 7` bytes.
/// Children per node.
const K: usize = 8;

#[derive(Debug, Clone)]
struct Level {
    sum: Vec<f64>,
    /// Minimum positive leaf below the node (`INFINITY` if none).
    min: Vec<f64>,
}

/// Sum and minimum-positive-value tree over `len` leaves.
#[derive(Debug, Clone)]
pub(crate) struct SumTree {
    len: usize,
    /// Leaf values; `f32`, so the 8 siblings of a node share a cache line.
    leaves: Vec<f32>,
    /// Internal levels, bottom up; the last holds one node, the root.
    levels: Vec<Level>,
    /// Leaf updates since sums were last recomputed exactly.
    updates_since_rebuild: usize,
}

/// Where a prefix-sum search landed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Found {
    pub leaf: usize,
    pub value: f64,
}

#[inline]
fn positive_or_inf(v: f64) -> f64 {
    if v > 0.0 {
        v
    } else {
        f64::INFINITY
    }
}

impl SumTree {
    pub(crate) fn new(len: usize) -> Self {
        let leaves = vec![0.0f32; len.max(1).next_multiple_of(K)];
        let mut levels = Vec::new();
        let mut n = leaves.len() / K;
        loop {
            let padded = if n > 1 { n.next_multiple_of(K) } else { 1 };
            levels.push(Level {
                sum: vec![0.0; padded],
                min: vec![f64::INFINITY; padded],
            });
            if padded == 1 {
                break;
            }
            n = padded / K;
        }
        SumTree {
            len,
            leaves,
            levels,
            updates_since_rebuild: 0,
        }
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
        f64::from(self.leaves[leaf])
    }

    /// Sum and min of the children of node `node` of internal level `lvl`.
    fn children(&self, lvl: usize, node: usize) -> (f64, f64) {
        let base = node * K;
        // Four partial accumulators keep the dependency chains short.
        let mut sum = [0.0f64; 4];
        let mut min = [f64::INFINITY; 4];
        if lvl == 0 {
            for (i, &v) in self.leaves[base..base + K].iter().enumerate() {
                let v = f64::from(v);
                sum[i % 4] += v;
                min[i % 4] = min[i % 4].min(positive_or_inf(v));
            }
        } else {
            let below = &self.levels[lvl - 1];
            for i in 0..K {
                sum[i % 4] += below.sum[base + i];
                min[i % 4] = min[i % 4].min(below.min[base + i]);
            }
        }
        (
            (sum[0] + sum[1]) + (sum[2] + sum[3]),
            min[0].min(min[1]).min(min[2].min(min[3])),
        )
    }

    /// Sets one leaf (`value >= 0`, finite). Sums move by the delta (one add
    /// per level); the min is recomputed only along the path where it can
    /// change. Cost O(log8 N) plus `K` loads per level where the min moved.
    fn set(&mut self, leaf: usize, value: f64) {
        let old = f64::from(self.leaves[leaf]);
        self.leaves[leaf] = value as f32;
        let new = f64::from(self.leaves[leaf]);
        let delta = new - old;
        let mut node = leaf;
        let mut min_dirty = true;
        for lvl in 0..self.levels.len() {
            node /= K;
            self.levels[lvl].sum[node] += delta;
            if min_dirty {
                let current = self.levels[lvl].min[node];
                let np = positive_or_inf(new);
                if np <= current && positive_or_inf(old) != current {
                    self.levels[lvl].min[node] = np;
                } else {
                    let (_, m) = self.children(lvl, node);
                    min_dirty = m != current;
                    self.levels[lvl].min[node] = m;
                }
            }
        }
    }

    /// Recomputes every internal node exactly (clears delta drift).
    fn rebuild(&mut self) {
        for lvl in 0..self.levels.len() {
            for node in 0..self.levels[lvl].sum.len() {
                let base = node * K;
                let in_range = if lvl == 0 {
                    base < self.leaves.len()
                } else {
                    base < self.levels[lvl - 1].sum.len()
                };
                let (s, m) = if in_range {
                    self.children(lvl, node)
                } else {
                    (0.0, f64::INFINITY)
                };
                self.levels[lvl].sum[node] = s;
                self.levels[lvl].min[node] = m;
            }
        }
        self.updates_since_rebuild = 0;
    }

    /// Sets leaves (`value >= 0`, finite). After about `len` leaf updates
    /// the sums are recomputed exactly, amortised O(1) per update, so
    /// floating-point drift from delta updates stays bounded.
    pub(crate) fn set_many(&mut self, updates: impl IntoIterator<Item = (usize, f64)>) {
        for (leaf, value) in updates {
            if leaf < self.len {
                self.set(leaf, value);
                self.updates_since_rebuild += 1;
            }
        }
        if self.updates_since_rebuild > self.len.max(1024) {
            self.rebuild();
        }
    }

    /// For each prefix mass in `targets` (each in `[0, total)`), the leaf
    /// whose cumulative range contains it. Processed level by level for all
    /// targets so their cache misses overlap. Never returns a zero leaf while
    /// the total is positive.
    pub(crate) fn find_many(
        &self,
        targets: &mut [f64],
        nodes: &mut Vec<usize>,
        out: &mut Vec<Found>,
    ) {
        nodes.clear();
        nodes.resize(targets.len(), 0);
        for lvl in (0..self.levels.len()).rev() {
            for (node, t) in nodes.iter_mut().zip(targets.iter_mut()) {
                let base = *node * K;
                let pick = if lvl == 0 {
                    scan(
                        self.leaves[base..base + K].iter().map(|&v| f64::from(v)),
                        *t,
                    )
                } else {
                    scan(self.levels[lvl - 1].sum[base..base + K].iter().copied(), *t)
                };
                match pick {
                    Pick::Child { index, before } => {
                        *t -= before;
                        *node = base + index;
                    }
                    Pick::Past { last_positive } => {
                        // Rounding left `t` past the last child: take the
                        // last positive one, and keep `t` past the end so
                        // every lower level does the same.
                        *t = f64::INFINITY;
                        *node = base + last_positive;
                    }
                }
            }
        }
        out.clear();
        out.extend(nodes.iter().map(|&leaf| Found {
            leaf,
            value: f64::from(self.leaves[leaf]),
        }));
    }
}

enum Pick {
    Child { index: usize, before: f64 },
    Past { last_positive: usize },
}

/// Branch-free scan of the `K` children (a linear search's exit branch would
/// mispredict once per level): the number of children whose cumulative
/// mass is `<= t` is the chosen child.
#[inline(always)]
fn scan(children: impl Iterator<Item = f64>, t: f64) -> Pick {
    let mut acc = 0.0;
    let mut before = 0.0;
    let mut index = 0usize;
    let mut last_positive = 0usize;
    let mut masses = [0.0f64; K];
    for (c, s) in children.enumerate() {
        masses[c] = s;
        acc += s;
        let passed = acc <= t;
        index += usize::from(passed);
        before = if passed { acc } else { before };
        last_positive = if s > 0.0 { c } else { last_positive };
    }
    if index < K && masses[index] > 0.0 {
        Pick::Child { index, before }
    } else {
        Pick::Past { last_positive }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_mins_and_search_match_a_linear_scan() {
        let n = 1000;
        let mut t = SumTree::new(n);
        let vals: Vec<f64> = (0..n).map(|i| ((i * 7919) % 13) as f64 * 0.5).collect();
        t.set_many(vals.iter().copied().enumerate());
        let total: f64 = vals.iter().sum();
        assert!((t.total() - total).abs() < 1e-9);
        let min = vals
            .iter()
            .copied()
            .filter(|&v| v > 0.0)
            .fold(f64::INFINITY, f64::min);
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
        t.set_many([(out[0].leaf, 0.0)]);
        assert!((t.total() - (total - vals[out[0].leaf])).abs() < 1e-9);
        // Min follows removals and additions; a rebuild agrees with deltas.
        let mut small = SumTree::new(40);
        small.set_many([(3, 2.0), (30, 0.5), (31, 4.0)]);
        assert_eq!(small.min_positive(), 0.5);
        small.set_many([(30, 0.0)]);
        assert_eq!(small.min_positive(), 2.0);
        small.set_many([(3, 8.0)]);
        assert_eq!(small.min_positive(), 4.0);
        let (sum, min) = (small.total(), small.min_positive());
        small.rebuild();
        assert_eq!((small.total(), small.min_positive()), (sum, min));
    }
}
