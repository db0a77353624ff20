//! [`MinTree`]: the smallest positive leaf of a [`SumTree`](super::sum_tree::SumTree),
//! kept small enough to stay in cache.
//!
//! Prioritized sampling needs only the global minimum (it normalises the
//! importance weights), so the minimum is kept per group of 64 leaves, not
//! per node of the sum tree: at 1M leaves 62 KiB of `f32` (leaves are
//! `f32`, so their minimum is exact in `f32`) against 1 MiB of `f64` level-0
//! mins, which missed the cache on most priority updates (the search reads
//! only sums, so nothing had brought them in). Above the groups, each node
//! holds the minimum of 16 children (one line of `f32`).
//!
//! An update reads its group's minimum and stops there unless that changes:
//! a smaller value replaces it; the holder of the minimum growing means a
//! rescan of its 64 leaves (four lines), which is rare because sampling
//! favours large priorities, and the priorities that are updated are the
//! sampled ones.

use crate::storage::prefetch;

/// Leaves per group: 8 leaf blocks of the sum tree.
const GROUP: usize = 64;
/// Children per node above the groups: one cache line of `f32`.
const FAN: usize = 16;

#[inline]
fn positive_or_inf(v: f32) -> f32 {
    if v > 0.0 {
        v
    } else {
        f32::INFINITY
    }
}

/// Minimum positive leaf per group of [`GROUP`] leaves and above.
#[derive(Debug, Clone)]
pub(super) struct MinTree {
    /// Bottom up: `levels[0][g]` is group `g`'s minimum, `levels[l + 1][i]`
    /// the minimum of `levels[l][FAN i .. FAN i + FAN]`; the last holds one
    /// value. `INFINITY` where no leaf below is positive.
    levels: Vec<Vec<f32>>,
}

impl MinTree {
    /// A tree over `leaves` leaves, all zero.
    pub(super) fn new(leaves: usize) -> Self {
        let mut levels = Vec::new();
        let mut n = leaves.max(1).div_ceil(GROUP);
        loop {
            levels.push(vec![f32::INFINITY; n]);
            if n == 1 {
                break;
            }
            n = n.div_ceil(FAN);
        }
        MinTree { levels }
    }

    /// Smallest positive leaf (`INFINITY` when none is).
    pub(super) fn min_positive(&self) -> f32 {
        self.levels.last().map_or(f32::INFINITY, |l| l[0])
    }

    /// Starts loading the group minimum that [`Self::replace`] of `leaf`
    /// reads first (the groups stay in L2 only while nothing else streams
    /// through it).
    pub(super) fn prefetch(&self, leaf: usize) {
        if let Some(m) = self.levels[0].get(leaf / GROUP) {
            prefetch(m);
        }
    }

    /// Leaf `leaf` went from `old` to `new`; `leaf_value(i)` reads leaf `i`
    /// as it is now (after the write). Going up, `(old, new)` is the child's
    /// old and new minimum: a node's minimum changes only if `new` is below
    /// it, or the child held it and grew (rescan the node's children); in
    /// every other case nothing above changes either.
    pub(super) fn replace(
        &mut self,
        leaf: usize,
        old: f32,
        new: f32,
        leaf_value: impl Fn(usize) -> f32,
    ) {
        let (mut old, mut new) = (positive_or_inf(old), positive_or_inf(new));
        let mut node = leaf / GROUP;
        for lvl in 0..self.levels.len() {
            let current = self.levels[lvl][node];
            let min = if new < current {
                new
            } else if old == current && new > current {
                self.rescan(lvl, node, &leaf_value)
            } else {
                return;
            };
            if min == current {
                return;
            }
            self.levels[lvl][node] = min;
            (old, new) = (current, min);
            node /= FAN;
        }
    }

    /// Recomputes every minimum from the leaves (`leaf_value(i)`), bottom
    /// up: O(leaves), for leaves written all at once.
    pub(super) fn rebuild(&mut self, leaf_value: impl Fn(usize) -> f32) {
        for lvl in 0..self.levels.len() {
            for node in 0..self.levels[lvl].len() {
                let m = self.rescan(lvl, node, &leaf_value);
                self.levels[lvl][node] = m;
            }
        }
    }

    /// Minimum of node `node`'s children at level `lvl` (leaves for level 0).
    fn rescan(&self, lvl: usize, node: usize, leaf_value: &impl Fn(usize) -> f32) -> f32 {
        if lvl == 0 {
            (node * GROUP..(node + 1) * GROUP)
                .map(|i| positive_or_inf(leaf_value(i)))
                .fold(f32::INFINITY, f32::min)
        } else {
            let below = &self.levels[lvl - 1];
            below[node * FAN..((node + 1) * FAN).min(below.len())]
                .iter()
                .copied()
                .fold(f32::INFINITY, f32::min)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leaf values as the sum tree would hold them, with the tree beside.
    struct Model {
        leaves: Vec<f32>,
        tree: MinTree,
    }

    impl Model {
        fn set(&mut self, leaf: usize, value: f32) {
            let old = std::mem::replace(&mut self.leaves[leaf], value);
            let leaves = &self.leaves;
            self.tree
                .replace(leaf, old, value, |i| leaves.get(i).copied().unwrap_or(0.0));
        }
        fn brute_force(&self) -> f32 {
            self.leaves
                .iter()
                .copied()
                .map(positive_or_inf)
                .fold(f32::INFINITY, f32::min)
        }
    }

    #[test]
    fn follows_a_brute_force_minimum_through_growth_shrinking_and_zeroing() {
        // 3 levels of groups above 5000 leaves: 79 groups, 5 nodes, a root.
        for len in [1, 63, 64, 65, 5000] {
            let mut m = Model {
                leaves: vec![0.0; len],
                tree: MinTree::new(len),
            };
            assert_eq!(m.tree.min_positive(), f32::INFINITY);
            let mut rng = crate::rng::WyRand::new(len as u64);
            for step in 0..20_000 {
                let leaf = rng.below(len as u64) as usize;
                // Few distinct values, so ties for the minimum are common.
                let value = match rng.below(5) {
                    0 => 0.0,
                    v => v as f32 * 0.5,
                };
                m.set(leaf, value);
                assert_eq!(
                    m.tree.min_positive(),
                    m.brute_force(),
                    "len {len} step {step}"
                );
            }
        }
    }
}
