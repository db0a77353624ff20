//! [`SumTree`]: an 8-ary sum/min tree over slot priorities, laid out for the
//! cache.
//!
//! Why 8-ary: with 1M leaves a binary tree is 20 levels, each a likely cache
//! miss; 8 children of `f64` fill exactly one cache line, 8 `f32` leaves half
//! of one, and the tree is 7 levels. (16-ary measured no faster: two lines
//! per internal node and longer add chains per level.) Levels are separate
//! arrays, bottom up; children of node `i` are `8i..8i+8` of the level
//! below. The 8 children of a node are one [`Block`] (`align(64)`: exactly
//! one cache line) or one [`LeafBlock`] (`align(32)`: half a line), so a
//! node's children never straddle two lines; with plain `Vec<f64>` (16-byte
//! aligned) every internal node cost two lines and half the leaf groups did.
//! A batch of searches runs level by level, each query prefetching its
//! next level's block as soon as it is known, so the misses overlap the
//! other queries' scans; a batch of updates prefetches every path first for
//! the same reason. Updates move
//! sums by the delta (one add per level) and touch mins only where they can
//! change; an exact rebuild after every `len` updates bounds floating-point
//! drift (amortised O(1), but that one call takes O(N): about a millisecond
//! at 1M leaves).
//! Cost: update and search O(log8 N) lines touched; memory about
//! `4 N + 16 N / 7` bytes.
use super::super::storage::prefetch;

/// Children per node.
const K: usize = 8;

/// The `f64` sums (or mins) of one node's 8 children: one cache line.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Block([f64; K]);

/// The 8 `f32` leaves under one level-0 node: half a cache line, never
/// straddling two.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
struct LeafBlock([f32; K]);

#[derive(Debug, Clone)]
struct Level {
    /// `sum[i / K].0[i % K]` is node `i`'s sum.
    sum: Vec<Block>,
    /// Minimum positive leaf below the node (`INFINITY` if none).
    min: Vec<Block>,
}

impl Level {
    fn nodes(&self) -> usize {
        self.sum.len() * K
    }
    #[inline(always)]
    fn sum(&self, i: usize) -> f64 {
        self.sum[i / K].0[i % K]
    }
    #[inline(always)]
    fn min(&self, i: usize) -> f64 {
        self.min[i / K].0[i % K]
    }
}

/// Sum and minimum-positive-value tree over `len` leaves.
#[derive(Debug, Clone)]
pub(crate) struct SumTree {
    len: usize,
    /// Leaf values; `f32`, so the 8 siblings of a node share a cache line.
    leaves: Vec<LeafBlock>,
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
        let leaves = vec![LeafBlock([0.0; K]); len.max(1).div_ceil(K)];
        let mut levels = Vec::new();
        // Nodes of the level being built: one per leaf block below.
        let mut n = leaves.len();
        loop {
            let blocks = n.div_ceil(K);
            levels.push(Level {
                sum: vec![Block([0.0; K]); blocks],
                min: vec![Block([f64::INFINITY; K]); blocks],
            });
            if n == 1 {
                break;
            }
            n = blocks;
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
        self.levels.last().map_or(0.0, |l| l.sum(0))
    }

    /// Smallest positive leaf (`INFINITY` when all are zero).
    pub(crate) fn min_positive(&self) -> f64 {
        self.levels.last().map_or(f64::INFINITY, |l| l.min(0))
    }

    pub(crate) fn get(&self, leaf: usize) -> f64 {
        f64::from(self.leaves[leaf / K].0[leaf % K])
    }

    /// Sum and min of the children of node `node` of internal level `lvl`.
    fn children(&self, lvl: usize, node: usize) -> (f64, f64) {
        // Four partial accumulators keep the dependency chains short.
        let mut sum = [0.0f64; 4];
        let mut min = [f64::INFINITY; 4];
        if lvl == 0 {
            for (i, &v) in self.leaves[node].0.iter().enumerate() {
                let v = f64::from(v);
                sum[i % 4] += v;
                min[i % 4] = min[i % 4].min(positive_or_inf(v));
            }
        } else {
            let below = &self.levels[lvl - 1];
            let (s, m) = (&below.sum[node].0, &below.min[node].0);
            for i in 0..K {
                sum[i % 4] += s[i];
                min[i % 4] = min[i % 4].min(m[i]);
            }
        }
        (
            (sum[0] + sum[1]) + (sum[2] + sum[3]),
            min[0].min(min[1]).min(min[2].min(min[3])),
        )
    }

    /// Sets one leaf (`value >= 0`, finite). Sums move by the delta (one add
    /// per level). Mins: going up, `(old, new)` is the child's old and new
    /// minimum; a node's min can only change if `new < min` (becomes `new`)
    /// or the child held the min and grew (recompute its 8 children); in
    /// every other case it and all above are unchanged, so the min lines are
    /// not even read further up. Cost O(log8 N).
    fn set(&mut self, leaf: usize, value: f64) {
        let slot = &mut self.leaves[leaf / K].0[leaf % K];
        let old = f64::from(*slot);
        *slot = value as f32;
        let new = f64::from(*slot);
        let delta = new - old;
        let mut node = leaf;
        let mut mins = Some((positive_or_inf(old), positive_or_inf(new)));
        for lvl in 0..self.levels.len() {
            node /= K;
            self.levels[lvl].sum[node / K].0[node % K] += delta;
            let Some((cold, cnew)) = mins else { continue };
            let current = self.levels[lvl].min(node);
            let m = if cnew < current {
                cnew
            } else if cold == current && cnew > current {
                self.children(lvl, node).1
            } else {
                current
            };
            if m == current {
                mins = None;
            } else {
                self.levels[lvl].min[node / K].0[node % K] = m;
                mins = Some((current, m));
            }
        }
    }

    /// Recomputes every internal node exactly (clears delta drift).
    fn rebuild(&mut self) {
        for lvl in 0..self.levels.len() {
            let below = if lvl == 0 {
                self.leaves.len()
            } else {
                self.levels[lvl - 1].sum.len()
            };
            for node in 0..self.levels[lvl].nodes() {
                let (s, m) = if node < below {
                    self.children(lvl, node)
                } else {
                    (0.0, f64::INFINITY)
                };
                self.levels[lvl].sum[node / K].0[node % K] = s;
                self.levels[lvl].min[node / K].0[node % K] = m;
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

    /// `set_many` for a batch of random leaves (priority updates): first
    /// prefetches each update's leaf block and its level-0 and level-1 sum
    /// and min blocks (the levels that miss; higher ones are hot), so the
    /// batch's misses overlap instead of serialising inside `set`.
    pub(crate) fn set_batch(&mut self, updates: &[(usize, f64)]) {
        for &(leaf, _) in updates {
            if leaf < self.len {
                prefetch(&self.leaves[leaf / K]);
                let mut node = leaf / K;
                for level in self.levels.iter().take(2) {
                    prefetch(&level.sum[node / K]);
                    prefetch(&level.min[node / K]);
                    node /= K;
                }
            }
        }
        self.set_many(updates.iter().copied());
    }

    /// For each prefix mass in `targets` (each in `[0, total)`), the leaf
    /// whose cumulative range contains it. Processed level by level for all
    /// targets; as each target's child is chosen, the block it reads one
    /// level down is prefetched, so its miss overlaps the other targets'
    /// scans. (Prefetching a whole level's blocks just before scanning it
    /// left the first target's miss exposed at every level and issued 128
    /// misses at once, more than the core keeps in flight.) Never returns a
    /// zero leaf while the total is positive.
    pub(crate) fn find_many(
        &self,
        targets: &mut [f64],
        nodes: &mut Vec<usize>,
        out: &mut Vec<Found>,
    ) {
        nodes.clear();
        nodes.resize(targets.len(), 0);
        for lvl in (0..self.levels.len()).rev() {
            // `node` is the node of level `lvl` each target is in; its
            // children are block `node` of the level below.
            // Targets are sorted (stratified), so near the root consecutive
            // targets share a node: its prefix sums are computed once.
            let mut cached = usize::MAX;
            let mut prefix = Prefix {
                masses: [0.0; K],
                acc: [0.0; K],
            };
            for (node, t) in nodes.iter_mut().zip(targets.iter_mut()) {
                if *node != cached {
                    prefix = Prefix::new(if lvl == 0 {
                        self.leaves[*node].0.map(f64::from)
                    } else {
                        self.levels[lvl - 1].sum[*node].0
                    });
                    cached = *node;
                }
                let pick = prefix.pick(*t);
                let base = *node * K;
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
                // The block this target reads at the next level, fetched
                // now: it arrives while the other targets are scanned.
                // Only the three lowest levels miss; higher ones are hot.
                match lvl {
                    1 => prefetch(&self.leaves[*node]),
                    2 | 3 => prefetch(&self.levels[lvl - 2].sum[*node]),
                    _ => {}
                }
            }
        }
        out.clear();
        out.extend(nodes.iter().map(|&leaf| Found {
            leaf,
            value: self.get(leaf),
        }));
    }
}

enum Pick {
    Child { index: usize, before: f64 },
    Past { last_positive: usize },
}

/// The children of one node as inclusive prefix sums, for `pick`.
#[derive(Clone, Copy)]
struct Prefix {
    masses: [f64; K],
    acc: [f64; K],
}

impl Prefix {
    /// Pairwise: three dependent adds deep instead of eight (a running sum's
    /// chain was on the search's critical path at every level). Adding
    /// non-negative masses is monotone in floating point too, so `acc`
    /// never decreases and a zero-mass child repeats its left neighbour.
    #[inline(always)]
    fn new(m: [f64; K]) -> Self {
        let (p01, p23, p45, p67) = (m[0] + m[1], m[2] + m[3], m[4] + m[5], m[6] + m[7]);
        let p03 = p01 + p23;
        let acc = [
            m[0],
            p01,
            p01 + m[2],
            p03,
            p03 + m[4],
            p03 + p45,
            p03 + (p45 + m[6]),
            p03 + (p45 + p67),
        ];
        Prefix { masses: m, acc }
    }

    /// Branch-free choice (a linear search's exit branch would mispredict
    /// once per level): the number of children whose cumulative mass is
    /// `<= t` is the chosen child; 8 independent compares.
    #[inline(always)]
    fn pick(&self, t: f64) -> Pick {
        let index = self.acc.iter().map(|&a| usize::from(a <= t)).sum::<usize>();
        if index < K && self.masses[index] > 0.0 {
            let before = if index == 0 { 0.0 } else { self.acc[index - 1] };
            Pick::Child { index, before }
        } else {
            // Rare (rounding at the right edge): found only when needed.
            Pick::Past {
                last_positive: self.masses.iter().rposition(|&m| m > 0.0).unwrap_or(0),
            }
        }
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

    #[test]
    fn batched_delta_updates_track_a_brute_force_sum_and_min() {
        // Exercises the early exits of `set`'s min propagation (min holder
        // growing, shrinking, zeroed) across several levels.
        let n = 5000;
        let mut t = SumTree::new(n);
        let mut vals = vec![0.0f64; n];
        let mut rng = super::super::super::rng::WyRand::new(9);
        for round in 0..200 {
            let updates: Vec<(usize, f64)> = (0..64)
                .map(|_| {
                    let leaf = rng.below(n as u64) as usize;
                    let v = match rng.below(4) {
                        0 => 0.0,
                        _ => f64::from((rng.unit_f64() * 100.0) as f32),
                    };
                    (leaf, v)
                })
                .collect();
            for &(leaf, v) in &updates {
                vals[leaf] = v;
            }
            t.set_batch(&updates);
            let total: f64 = vals.iter().sum();
            let min = vals
                .iter()
                .copied()
                .filter(|&v| v > 0.0)
                .fold(f64::INFINITY, f64::min);
            assert!(
                (t.total() - total).abs() < 1e-6 * total.max(1.0),
                "round {round}"
            );
            assert_eq!(t.min_positive(), min, "round {round}");
        }
    }
}
