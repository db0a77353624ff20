//! [`SumTree`]: an 8-ary tree of prefix sums over slot priorities, laid
//! out for the cache, with a [`MinTree`] beside it for the smallest one.
//!
//! Why 8-ary: with 1M leaves a binary tree is 20 levels, each a likely cache
//! miss; 8 children of `f64` fill exactly one cache line, 8 `f32` leaves half
//! of one, and the tree is 7 levels. (16-ary measured no faster: two lines
//! per internal node and longer add chains per level.) Levels are separate
//! arrays, bottom up; children of node `i` are `8i..8i+8` of the level
//! below. The 8 children of a node are one [`Block`] (`align(64)`: exactly
//! one cache line) or one [`LeafBlock`] (`align(32)`: half a line), so a
//! node's children never straddle two lines.
//!
//! A block holds its 8 children's sums as inclusive prefix sums, which is
//! what a search compares its target against: a step down is 8 compares
//! and one load, with nothing to add up first. An update adds its delta to
//! its node's entry and the later siblings' (one line per level, 8 adds in
//! four packed instructions). A batch of searches runs level by level, each
//! query prefetching its next level's block as soon as it is known, so the
//! misses overlap the other queries' scans. A batch of updates also runs
//! level by level above level 0: updates in one block (most of them near
//! the root) add into registers and reach the block once, instead of each
//! waiting on the previous one's store. (Level 0 is updated beside the
//! leaf: a batch's leaves rarely share a block there.)
//! Floating-point drift from the delta updates is bounded by a rolling
//! sweep: each batch of `u` updates recomputes about `u / 7` more blocks
//! exactly from their children (level by level, bottom up, so each level
//! is recomputed from the one below after that one was), so every block
//! is recomputed once per `len` updates, as a full rebuild every `len` updates did, but no call pays
//! for the whole tree (a full rebuild took a millisecond at 1M leaves, a
//! second at 1B, under the sampler's lock).
//! Cost: update and search O(log8 N) lines touched; memory about
//! `4 N + 8 N / 7` bytes, plus the min tree's `N / 16`.
use super::min_tree::MinTree;
use crate::storage::prefetch;

/// Children per node.
const K: usize = 8;

/// The prefix sums of one node's 8 children: one cache line.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Block([f64; K]);

/// The 8 `f32` leaves under one level-0 node: half a cache line, never
/// straddling two.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
struct LeafBlock([f32; K]);

/// `SUFFIX[j][i]` is 1 where `i >= j`: a delta times row `j` moves the
/// prefix sums of child `j` and of every child after it.
const SUFFIX: [[f64; K]; K] = {
    let mut rows = [[0.0; K]; K];
    let mut j = 0;
    while j < K {
        let mut i = j;
        while i < K {
            rows[j][i] = 1.0;
            i += 1;
        }
        j += 1;
    }
    rows
};

/// Sum tree over `len` leaves.
#[derive(Debug, Clone)]
pub(crate) struct SumTree {
    len: usize,
    /// Leaf values; `f32`, so the 8 siblings of a node share a cache line.
    leaves: Vec<LeafBlock>,
    /// Internal levels, bottom up; the last holds one node, the root.
    /// `levels[l][b].0[j]` is the sum of nodes `8b ..= 8b + j` of level `l`
    /// (level 0's nodes are the leaf blocks): the prefix sums of node `b`'s
    /// children one level up.
    levels: Vec<Vec<Block>>,
    /// Smallest positive leaf.
    mins: MinTree,
    /// The rolling sweep's next block: `(level, block)`.
    sweep: (usize, usize),
    /// Leaf updates times blocks, not yet paid for by sweeping (a block
    /// is due per `sweep_period` of it).
    sweep_debt: usize,
    /// Blocks in all levels.
    blocks: usize,
    /// Blocks recomputed by the sweep so far (what the tests count).
    swept: u64,
    /// `(node, delta)` per update of a batch, reused across batches.
    pending: Vec<(usize, f64)>,
}

/// Where a prefix-sum search landed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Found {
    pub leaf: usize,
    pub value: f64,
}

/// Updates applied per pass of [`SumTree::apply`]: enough that a level's
/// blocks near the root are reached once per pass, few enough that the
/// pass's nodes stay in L1.
const PASS: usize = 256;

impl SumTree {
    pub(crate) fn new(len: usize) -> Self {
        let leaves = vec![LeafBlock([0.0; K]); len.max(1).div_ceil(K)];
        let mut levels = Vec::new();
        // Nodes of the level being built: one per leaf block below.
        let mut n = leaves.len();
        loop {
            let blocks = n.div_ceil(K);
            levels.push(vec![Block([0.0; K]); blocks]);
            if n == 1 {
                break;
            }
            n = blocks;
        }
        let levels_len = levels.iter().map(Vec::len).sum();
        SumTree {
            len,
            leaves,
            levels,
            mins: MinTree::new(len),
            sweep: (0, 0),
            sweep_debt: 0,
            blocks: levels_len,
            swept: 0,
            pending: Vec::new(),
        }
    }

    /// Leaf updates per full sweep: every block is recomputed exactly once
    /// in this many.
    fn sweep_period(&self) -> usize {
        self.len.max(1024)
    }

    /// Sum of all leaves.
    pub(crate) fn total(&self) -> f64 {
        self.levels.last().map_or(0.0, |l| l[0].0[0])
    }

    /// Smallest positive leaf (`INFINITY` when all are zero).
    pub(crate) fn min_positive(&self) -> f64 {
        f64::from(self.mins.min_positive())
    }

    pub(crate) fn get(&self, leaf: usize) -> f64 {
        f64::from(self.leaves[leaf / K].0[leaf % K])
    }

    /// Sum of the children of node `node` of level `lvl`.
    fn children_sum(&self, lvl: usize, node: usize) -> f64 {
        if lvl == 0 {
            let v = self.leaves[node].0.map(f64::from);
            ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]))
        } else {
            self.levels[lvl - 1][node].0[K - 1]
        }
    }

    /// Block `b` of level `lvl` recomputed from the level below: the
    /// prefix sums of its children's totals.
    fn exact_block(&self, lvl: usize, b: usize) -> Block {
        let below = if lvl == 0 {
            self.leaves.len()
        } else {
            self.levels[lvl - 1].len()
        };
        let mut acc = [0.0; K];
        let mut run = 0.0;
        for (j, a) in acc.iter_mut().enumerate() {
            let node = b * K + j;
            if node < below {
                run += self.children_sum(lvl, node);
            }
            *a = run;
        }
        Block(acc)
    }

    /// Recomputes every internal node exactly (clears delta drift; the
    /// mins never drift).
    fn rebuild(&mut self) {
        for lvl in 0..self.levels.len() {
            for b in 0..self.levels[lvl].len() {
                self.levels[lvl][b] = self.exact_block(lvl, b);
            }
        }
        self.sweep = (0, 0);
        self.sweep_debt = 0;
    }

    /// Recomputes the sweep's next `n` blocks exactly from their children
    /// (bottom up, so a level is recomputed from the one below after that
    /// one was).
    fn sweep_blocks(&mut self, n: usize) {
        for _ in 0..n {
            let (lvl, b) = self.sweep;
            // The parent's entry for this block keeps its old total (they
            // differ by drift, as any two levels do between recomputes)
            // until the sweep reaches the parent's level and recomputes it
            // from this one.
            self.levels[lvl][b] = self.exact_block(lvl, b);
            self.swept += 1;
            self.sweep = if b + 1 < self.levels[lvl].len() {
                (lvl, b + 1)
            } else {
                ((lvl + 1) % self.levels.len(), 0)
            };
        }
    }

    /// Sets leaves (`value >= 0`, finite; leaves past `len` are ignored).
    /// Each call also moves the rolling sweep on by its share (module
    /// docs), so floating-point drift from delta updates stays bounded:
    /// O(log len) per update, amortised and in every call.
    pub(crate) fn set_many(&mut self, updates: impl IntoIterator<Item = (usize, f64)>) {
        let mut pending = std::mem::take(&mut self.pending);
        let len = self.len;
        let mut updates = updates.into_iter().filter(|&(leaf, _)| leaf < len);
        loop {
            pending.clear();
            pending.extend(updates.by_ref().take(PASS));
            if pending.is_empty() {
                break;
            }
            self.apply(&mut pending);
        }
        self.pending = pending;
        let period = self.sweep_period();
        let due = self.sweep_debt / period;
        self.sweep_debt %= period;
        self.sweep_blocks(due);
    }

    /// Writes `(leaf, value)` for many leaves (leaves past `len` are
    /// ignored), then recomputes every sum and minimum once: O(len), where
    /// `set_many` would walk each leaf's path, O(n log len). For filling a
    /// tree from stored items (a reopen).
    pub(crate) fn assign(&mut self, leaves: impl IntoIterator<Item = (usize, f64)>) {
        for (leaf, value) in leaves {
            if leaf < self.len {
                self.leaves[leaf / K].0[leaf % K] = value as f32;
            }
        }
        self.rebuild();
        let leaves = &self.leaves;
        self.mins
            .rebuild(|i| leaves.get(i / K).map_or(0.0, |b| b.0[i % K]));
    }

    /// `set_many` for a batch of random leaves (priority updates): first
    /// prefetches each update's leaf block, its group minimum and its
    /// level-0 and level-1 blocks (the levels that miss; higher ones are
    /// hot), so the batch's misses overlap.
    pub(crate) fn set_batch(&mut self, updates: &[(usize, f64)]) {
        // Group minimums first: they are read first, and they are the ones
        // likely to miss after a search, which brought in the rest.
        for &(leaf, _) in updates {
            self.mins.prefetch(leaf);
        }
        for &(leaf, _) in updates {
            if leaf < self.len {
                prefetch(&self.leaves[leaf / K]);
                let mut node = leaf / K;
                for level in self.levels.iter().take(2) {
                    prefetch(&level[node / K]);
                    node /= K;
                }
            }
        }
        self.set_many(updates.iter().copied());
    }

    /// Writes `(leaf, value)` updates (leaves `< len`) and moves level 0's
    /// sums, then the sums above level by level; `updates` is left holding
    /// root-level nodes.
    fn apply(&mut self, updates: &mut [(usize, f64)]) {
        let Some((bottom, upper)) = self.levels.split_first_mut() else {
            return;
        };
        for u in updates.iter_mut() {
            let (leaf, value) = *u;
            let slot = &mut self.leaves[leaf / K].0[leaf % K];
            let old = *slot;
            *slot = value as f32;
            let new = *slot;
            let leaves = &self.leaves;
            self.mins.replace(leaf, old, new, |i| {
                leaves.get(i / K).map_or(0.0, |b| b.0[i % K])
            });
            let delta = f64::from(new) - f64::from(old);
            // Level 0 directly: a batch's leaves rarely share a block there.
            let node = leaf / K;
            for (a, s) in bottom[node / K].0.iter_mut().zip(&SUFFIX[node % K]) {
                *a += delta * s;
            }
            *u = (node, delta);
        }
        self.sweep_debt += updates.len() * self.blocks;
        for level in upper {
            // Consecutive updates in one block add into `moved`, which
            // reaches the block when the next update is in another one.
            let mut block = usize::MAX;
            let mut moved = [0.0; K];
            for (node, delta) in updates.iter_mut() {
                *node /= K;
                if *node / K != block {
                    if let Some(b) = level.get_mut(block) {
                        add(&mut b.0, &moved);
                    }
                    block = *node / K;
                    moved = [0.0; K];
                }
                for (m, s) in moved.iter_mut().zip(&SUFFIX[*node % K]) {
                    *m += *delta * s;
                }
            }
            if let Some(b) = level.get_mut(block) {
                add(&mut b.0, &moved);
            }
        }
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
        // Internal levels: `node` is the node of level `lvl` each target is
        // in; its children's prefix sums are block `node` of the level
        // below, stored, so the pick is 8 compares and one load.
        for lvl in (1..self.levels.len()).rev() {
            let below = &self.levels[lvl - 1];
            for (node, t) in nodes.iter_mut().zip(targets.iter_mut()) {
                let acc = &below[*node].0;
                let index = acc.iter().map(|&a| usize::from(a <= *t)).sum::<usize>();
                let before = if index == 0 { 0.0 } else { acc[index - 1] };
                let base = *node * K;
                if index < K && acc[index] > before {
                    *t -= before;
                    *node = base + index;
                } else {
                    // Rounding left `t` past the last child: take the last
                    // positive one, and keep `t` past the end so every
                    // lower level does the same.
                    *t = f64::INFINITY;
                    *node = base + last_positive(acc);
                }
                // The block this target reads at the next level, fetched
                // now: it arrives while the other targets are scanned.
                // Only the three lowest levels miss; higher ones are hot.
                match lvl {
                    1 => prefetch(&self.leaves[*node]),
                    2 | 3 => prefetch(&self.levels[lvl - 2][*node]),
                    _ => {}
                }
            }
        }
        // Leaves: prefix sums computed from the block's 8 `f32`s.
        out.clear();
        out.extend(nodes.iter().zip(targets.iter()).map(|(&node, &t)| {
            let masses = self.leaves[node].0.map(f64::from);
            let acc = prefix_sums(masses);
            let index = acc.iter().map(|&a| usize::from(a <= t)).sum::<usize>();
            let index = if index < K && masses[index] > 0.0 {
                index
            } else {
                masses.iter().rposition(|&m| m > 0.0).unwrap_or(0)
            };
            Found {
                leaf: node * K + index,
                value: masses[index],
            }
        }));
    }
}

/// `block += moved`, lane by lane (packed adds).
#[inline(always)]
fn add(block: &mut [f64; K], moved: &[f64; K]) {
    for (b, m) in block.iter_mut().zip(moved) {
        *b += m;
    }
}

/// The last child whose inclusive prefix sum rises (0 if none): the last
/// with positive mass, for the rare past-the-end path.
fn last_positive(acc: &[f64; K]) -> usize {
    (1..K).rev().find(|&i| acc[i] > acc[i - 1]).unwrap_or(0)
}

/// Inclusive prefix sums of one leaf block's masses, pairwise: three
/// dependent adds deep instead of eight (a running sum's chain would sit on
/// the search's critical path). Adding non-negative masses is monotone in
/// floating point too, so the sums never decrease and a zero-mass leaf
/// repeats its left neighbour.
#[inline(always)]
fn prefix_sums(m: [f64; K]) -> [f64; K] {
    let (p01, p23, p45, p67) = (m[0] + m[1], m[2] + m[3], m[4] + m[5], m[6] + m[7]);
    let p03 = p01 + p23;
    [
        m[0],
        p01,
        p01 + m[2],
        p03,
        p03 + m[4],
        p03 + p45,
        p03 + (p45 + m[6]),
        p03 + (p45 + p67),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block of `a` within `tol` of the same block of `b`.
    fn blocks_agree(a: &SumTree, b: &SumTree, tol: f64) -> bool {
        a.levels.iter().zip(&b.levels).all(|(la, lb)| {
            la.iter()
                .zip(lb)
                .all(|(x, y)| x.0.iter().zip(&y.0).all(|(p, q)| (p - q).abs() <= tol))
        })
    }

    #[test]
    fn the_rolling_sweep_recomputes_every_block_once_per_len_updates_a_few_per_call() {
        let n = 20_000;
        let mut t = SumTree::new(n);
        let blocks: usize = t.levels.iter().map(Vec::len).sum();
        let period = t.sweep_period();
        let mut rng = crate::rng::WyRand::new(7);
        // Values over six orders of magnitude: deltas that do not cancel
        // exactly in f64.
        let value = |r: u64| 10f64.powi((r % 7) as i32 - 3) * ((r >> 8) % 1000) as f64 / 999.0;
        let mut swept_before = t.swept;
        for call in 0..(3 * n / 128) {
            let batch: Vec<(usize, f64)> = (0..128)
                .map(|_| {
                    let r = rng.next_u64();
                    ((r % n as u64) as usize, value(r >> 17))
                })
                .collect();
            t.set_many(batch);
            // A call pays for its own share of the sweep, never the tree.
            let swept = t.swept - swept_before;
            assert!(
                swept <= (128 * blocks).div_ceil(period) as u64,
                "call {call} recomputed {swept} of {blocks} blocks"
            );
            swept_before = t.swept;
        }
        // 3 n updates: at least two whole sweeps.
        assert!(t.swept >= 2 * blocks as u64, "{} of {blocks}", t.swept);
        let mut exact = t.clone();
        exact.rebuild();
        assert!(blocks_agree(&t, &exact, 1e-9 * exact.total()));
        assert!((t.total() - exact.total()).abs() <= 1e-9 * exact.total());
    }

    #[test]
    fn assigning_leaves_at_once_gives_the_tree_their_updates_give() {
        // 1000 leaves: three levels above the leaves, a partial last block.
        let n = 1000;
        let vals: Vec<(usize, f64)> = (0..n)
            .filter(|i| i % 3 != 0)
            .map(|i| (i, ((i * 7919) % 13) as f64 * 0.25 + 0.5))
            .collect();
        let mut walked = SumTree::new(n);
        walked.set_many(vals.iter().copied());
        let mut assigned = SumTree::new(n);
        // Leaves past `len` are ignored, as by `set_many`.
        assigned.assign(vals.iter().copied().chain([(n + 5, 9.0)]));
        assert!((assigned.total() - walked.total()).abs() < 1e-9);
        assert_eq!(assigned.min_positive(), walked.min_positive());
        assert_eq!(assigned.min_positive(), 0.5);
        for leaf in 0..n {
            assert_eq!(assigned.get(leaf), walked.get(leaf), "leaf {leaf}");
        }
        let total = walked.total();
        let targets: Vec<f64> = (0..97).map(|i| total * i as f64 / 97.0).collect();
        let (mut nodes, mut a, mut w) = (Vec::new(), Vec::new(), Vec::new());
        assigned.find_many(&mut targets.clone(), &mut nodes, &mut a);
        walked.find_many(&mut targets.clone(), &mut nodes, &mut w);
        assert_eq!(a, w);
        // And it goes on like any tree.
        assigned.set_many([(1, 0.0), (2, 0.125)]);
        assert_eq!(assigned.min_positive(), 0.125);
    }

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
    fn batched_delta_updates_track_a_brute_force_sum_min_and_search() {
        // Exercises the early exits of the min propagation (min holder
        // growing, shrinking, zeroed) across several levels, and the prefix
        // sums' deltas: random batches, and sorted batches of nearby leaves
        // that share blocks (the deltas merged before reaching a block).
        let n = 5000;
        let mut t = SumTree::new(n);
        let mut vals = vec![0.0f64; n];
        let mut rng = crate::rng::WyRand::new(9);
        let (mut nodes, mut out) = (Vec::new(), Vec::new());
        for round in 0..200 {
            let spread = if round % 2 == 0 { n } else { 200 };
            let start = rng.below((n - spread + 1) as u64) as usize;
            let mut updates: Vec<(usize, f64)> = (0..64)
                .map(|_| {
                    let leaf = start + rng.below(spread as u64) as usize;
                    let v = match rng.below(4) {
                        0 => 0.0,
                        _ => f64::from((rng.unit_f64() * 100.0) as f32),
                    };
                    (leaf, v)
                })
                .collect();
            if round % 4 == 1 {
                updates.sort_by_key(|u| u.0);
            }
            for &(leaf, v) in &updates {
                vals[leaf] = v;
            }
            t.set_batch(&updates);
            // A target in the middle of a positive leaf's range finds it.
            let mut before = 0.0;
            let (mut targets, mut expected) = (Vec::new(), Vec::new());
            for (leaf, &v) in vals.iter().enumerate() {
                if v > 0.0 && leaf % 97 == round % 97 {
                    targets.push(before + v / 2.0);
                    expected.push(leaf);
                }
                before += v;
            }
            t.find_many(&mut targets, &mut nodes, &mut out);
            let got: Vec<usize> = out.iter().map(|f| f.leaf).collect();
            assert_eq!(got, expected, "round {round}");
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
