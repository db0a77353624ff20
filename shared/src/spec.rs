//! Observation and action specs, and the validation of step batches against them.
//!
//! An actor declares its [`EnvSpec`] once, in its hello. From then on every
//! step batch is checked against it before any of its bytes reach the batcher,
//! so a malformed message costs only the stream that sent it.

use crate::error::ProtocolError;
use crate::pb;

/// Element type of observations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObsDType {
    F32,
    U8,
}

impl ObsDType {
    /// Bytes per element on the wire.
    pub const fn size(self) -> usize {
        match self {
            ObsDType::F32 => 4,
            ObsDType::U8 => 1,
        }
    }

    /// Lower-case name (`f32`, `u8`), as used on command lines.
    pub const fn name(self) -> &'static str {
        match self {
            ObsDType::F32 => "f32",
            ObsDType::U8 => "u8",
        }
    }

    pub fn from_proto(value: i32) -> Result<Self, ProtocolError> {
        match pb::DType::try_from(value) {
            Ok(pb::DType::DtypeF32) => Ok(ObsDType::F32),
            Ok(pb::DType::DtypeU8) => Ok(ObsDType::U8),
            _ => Err(ProtocolError::UnknownDType {
                field: "spec.obs_dtype",
                value,
            }),
        }
    }

    pub fn to_proto(self) -> pb::DType {
        match self {
            ObsDType::F32 => pb::DType::DtypeF32,
            ObsDType::U8 => pb::DType::DtypeU8,
        }
    }
}

impl std::str::FromStr for ObsDType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "f32" => Ok(ObsDType::F32),
            "u8" => Ok(ObsDType::U8),
            other => Err(format!("unknown dtype `{other}` (expected f32 or u8)")),
        }
    }
}

impl std::fmt::Display for ObsDType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Largest observation one env may send (64 MiB); guards `obs_bytes` overflow.
pub const MAX_OBS_BYTES: usize = 64 << 20;
/// Largest number of discrete actions accepted.
pub const MAX_ACTIONS: u32 = 1 << 16;
/// Largest number of floats in one continuous action.
pub const MAX_ACTION_DIM: usize = 1 << 12;

/// What an env's actions are: Gymnasium's `Discrete(n)` or an f32 `Box`.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionSpace {
    /// Actions are `0..n`.
    Discrete(u32),
    /// One action is `prod(shape)` f32s, row-major, element `i` within
    /// `[low[i], high[i]]` (bounds may be infinite, never NaN).
    Box {
        shape: Vec<usize>,
        low: Vec<f32>,
        high: Vec<f32>,
    },
}

impl ActionSpace {
    /// A box of `dim` floats, each within `[low, high]`.
    pub fn uniform_box(dim: usize, low: f32, high: f32) -> Self {
        ActionSpace::Box {
            shape: vec![dim],
            low: vec![low; dim],
            high: vec![high; dim],
        }
    }

    /// Discrete: the number of actions; Box: the floats in one action. The
    /// width of the policy's output per distribution parameter.
    pub fn dim(&self) -> usize {
        match self {
            ActionSpace::Discrete(n) => *n as usize,
            ActionSpace::Box { shape, .. } => shape.iter().product(),
        }
    }

    /// The number of actions of a discrete space, `None` for a box.
    pub fn discrete(&self) -> Option<u32> {
        match self {
            ActionSpace::Discrete(n) => Some(*n),
            ActionSpace::Box { .. } => None,
        }
    }

    pub fn is_continuous(&self) -> bool {
        matches!(self, ActionSpace::Box { .. })
    }

    /// Clips a continuous action (`dim()` floats) to the bounds in place.
    /// Does nothing for a discrete space.
    pub fn clip(&self, action: &mut [f32]) {
        if let ActionSpace::Box { low, high, .. } = self {
            for ((a, &lo), &hi) in action.iter_mut().zip(low).zip(high) {
                *a = a.clamp(lo, hi);
            }
        }
    }
}

impl std::fmt::Display for ActionSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActionSpace::Discrete(n) => write!(f, "Discrete({n})"),
            ActionSpace::Box { shape, low, high } => {
                let lo = low.iter().copied().fold(f32::INFINITY, f32::min);
                let hi = high.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                write!(f, "Box({shape:?}, {lo}..{hi})")
            }
        }
    }
}

/// What every env of one actor looks like.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvSpec {
    pub env_name: String,
    /// Shape of one env's observation, without a batch dimension. Images
    /// are channels-first, `[C, H, W]`.
    pub obs_shape: Vec<usize>,
    pub obs_dtype: ObsDType,
    pub action: ActionSpace,
}

impl EnvSpec {
    /// Gymnasium's CartPole-v1: 4 f32 observations, 2 actions.
    pub fn cartpole() -> Self {
        EnvSpec {
            env_name: "CartPole-v1".into(),
            obs_shape: vec![4],
            obs_dtype: ObsDType::F32,
            action: ActionSpace::Discrete(2),
        }
    }

    /// The synthetic benchmark env with the given observation and action space.
    pub fn synthetic(obs_shape: Vec<usize>, obs_dtype: ObsDType, num_actions: u32) -> Self {
        EnvSpec {
            env_name: "Synthetic".into(),
            obs_shape,
            obs_dtype,
            action: ActionSpace::Discrete(num_actions),
        }
    }

    /// The number of discrete actions, `None` for continuous actions.
    pub fn num_actions(&self) -> Option<u32> {
        self.action.discrete()
    }

    /// Elements in one env's observation.
    pub fn obs_len(&self) -> usize {
        self.obs_shape.iter().product()
    }

    /// Bytes of one env's observation on the wire.
    pub fn obs_bytes(&self) -> usize {
        self.obs_len() * self.obs_dtype.size()
    }

    /// The first field in which `other` differs from this spec, with both
    /// values as text: `(field, ours, theirs)`. `None` when they are equal.
    pub fn difference(&self, other: &EnvSpec) -> Option<(&'static str, String, String)> {
        if self.obs_shape != other.obs_shape {
            return Some((
                "spec.obs_shape",
                format!("{:?}", self.obs_shape),
                format!("{:?}", other.obs_shape),
            ));
        }
        if self.obs_dtype != other.obs_dtype {
            return Some((
                "spec.obs_dtype",
                self.obs_dtype.to_string(),
                other.obs_dtype.to_string(),
            ));
        }
        match (&self.action, &other.action) {
            (ActionSpace::Discrete(a), ActionSpace::Discrete(b)) if a != b => {
                return Some(("spec.num_actions", a.to_string(), b.to_string()));
            }
            (ActionSpace::Box { .. }, ActionSpace::Box { .. }) if self.action != other.action => {
                return Some((
                    "spec.action_box",
                    self.action.to_string(),
                    other.action.to_string(),
                ));
            }
            (ActionSpace::Discrete(_), ActionSpace::Box { .. })
            | (ActionSpace::Box { .. }, ActionSpace::Discrete(_)) => {
                return Some((
                    "spec.action_box",
                    self.action.to_string(),
                    other.action.to_string(),
                ));
            }
            _ => {}
        }
        if self.env_name != other.env_name {
            return Some((
                "spec.env_name",
                format!("{:?}", self.env_name),
                format!("{:?}", other.env_name),
            ));
        }
        None
    }

    /// Checks a spec received from an actor.
    pub fn from_proto(spec: &pb::EnvSpec) -> Result<Self, ProtocolError> {
        let obs_dtype = ObsDType::from_proto(spec.obs_dtype)?;
        if spec.obs_shape.is_empty() {
            return Err(ProtocolError::InvalidSpec {
                field: "spec.obs_shape",
                reason: "must have at least one dimension".into(),
            });
        }
        let mut bytes = obs_dtype.size();
        for (i, &d) in spec.obs_shape.iter().enumerate() {
            if d == 0 {
                return Err(ProtocolError::InvalidSpec {
                    field: "spec.obs_shape",
                    reason: format!("dimension {i} is zero"),
                });
            }
            bytes = bytes.saturating_mul(d as usize);
        }
        if bytes > MAX_OBS_BYTES {
            return Err(ProtocolError::InvalidSpec {
                field: "spec.obs_shape",
                reason: format!("{bytes} bytes per observation exceeds {MAX_OBS_BYTES}"),
            });
        }
        let action = match &spec.action_box {
            None => {
                if spec.num_actions == 0 || spec.num_actions > MAX_ACTIONS {
                    return Err(ProtocolError::InvalidSpec {
                        field: "spec.num_actions",
                        reason: format!(
                            "{} is not in 1..={MAX_ACTIONS} (and no `spec.action_box` is set)",
                            spec.num_actions
                        ),
                    });
                }
                ActionSpace::Discrete(spec.num_actions)
            }
            Some(b) => {
                if spec.num_actions != 0 {
                    return Err(ProtocolError::InvalidSpec {
                        field: "spec.num_actions",
                        reason: format!(
                            "is {} but `spec.action_box` is set: an action space is either \
                             discrete or a box",
                            spec.num_actions
                        ),
                    });
                }
                box_from_proto(b)?
            }
        };
        Ok(EnvSpec {
            env_name: spec.env_name.clone(),
            obs_shape: spec.obs_shape.iter().map(|&d| d as usize).collect(),
            obs_dtype,
            action,
        })
    }

    pub fn to_proto(&self) -> pb::EnvSpec {
        let (num_actions, action_box) = match &self.action {
            ActionSpace::Discrete(n) => (*n, None),
            ActionSpace::Box { shape, low, high } => (
                0,
                Some(pb::BoxSpace {
                    shape: shape.iter().map(|&d| d as u32).collect(),
                    low: low.clone(),
                    high: high.clone(),
                }),
            ),
        };
        pb::EnvSpec {
            env_name: self.env_name.clone(),
            obs_shape: self.obs_shape.iter().map(|&d| d as u32).collect(),
            obs_dtype: self.obs_dtype.to_proto() as i32,
            num_actions,
            action_box,
        }
    }

    /// Checks an action batch answering a step batch of `num_rows` envs:
    /// one valid action per row in the field this spec's action space uses,
    /// nothing in the other. Returns the field and what is wrong.
    pub fn check_actions(
        &self,
        batch: &pb::ActionBatch,
        num_rows: usize,
    ) -> Result<(), (&'static str, String)> {
        match &self.action {
            ActionSpace::Discrete(n) => {
                if batch.actions.len() != num_rows {
                    return Err((
                        "actions",
                        format!("{} entries for {num_rows} envs", batch.actions.len()),
                    ));
                }
                if !batch.continuous_actions.is_empty() {
                    return Err((
                        "continuous_actions",
                        "set for a discrete action space".into(),
                    ));
                }
                if let Some((i, a)) = batch.actions.iter().enumerate().find(|(_, &a)| a >= *n) {
                    return Err((
                        "actions",
                        format!("entry {i} = {a} is not below num_actions = {n}"),
                    ));
                }
            }
            ActionSpace::Box { .. } => {
                let want = num_rows * self.action.dim();
                if batch.continuous_actions.len() != want {
                    return Err((
                        "continuous_actions",
                        format!(
                            "{} floats for {num_rows} envs of {} each",
                            batch.continuous_actions.len(),
                            self.action.dim()
                        ),
                    ));
                }
                if !batch.actions.is_empty() {
                    return Err(("actions", "set for a continuous action space".into()));
                }
                if let Some(i) = batch.continuous_actions.iter().position(|a| !a.is_finite()) {
                    return Err((
                        "continuous_actions",
                        format!("entry {i} is not finite: {}", batch.continuous_actions[i]),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks a step batch from an actor with `num_envs` envs of this spec.
    ///
    /// On success every per-env field has one entry per env index, indices are
    /// distinct and in range, rewards are finite, no env is both terminated
    /// and truncated, and `observations` holds exactly one observation per
    /// env index, every f32 of it finite (a NaN or infinity would poison
    /// every batch it is trained in). The stream checks `seq` itself.
    ///
    /// Cost: one pass over the indices and the per-env fields, and for f32
    /// observations one vectorised pass over the bytes (`first_non_finite_f32`).
    pub fn validate_step_batch(
        &self,
        batch: &pb::StepBatch,
        num_envs: u32,
    ) -> Result<(), ProtocolError> {
        let n = batch.env_indices.len();
        if n == 0 {
            return Err(ProtocolError::EmptyBatch);
        }
        // Duplicate detection without allocation for the common small case.
        let mut seen_small = [0u64; 4];
        let mut seen_large: Vec<u64> = Vec::new();
        if num_envs as usize > 256 {
            seen_large = vec![0u64; (num_envs as usize).div_ceil(64)];
        }
        for (position, &index) in batch.env_indices.iter().enumerate() {
            if index >= num_envs {
                return Err(ProtocolError::EnvIndexOutOfRange {
                    position,
                    index,
                    num_envs,
                });
            }
            let words: &mut [u64] = if seen_large.is_empty() {
                &mut seen_small
            } else {
                &mut seen_large
            };
            let (w, b) = ((index / 64) as usize, index % 64);
            if words[w] & (1 << b) != 0 {
                return Err(ProtocolError::DuplicateEnvIndex { position, index });
            }
            words[w] |= 1 << b;
        }
        let counts: [(&'static str, usize); 4] = [
            ("rewards", batch.rewards.len()),
            ("terminated", batch.terminated.len()),
            ("truncated", batch.truncated.len()),
            ("run_ids", batch.run_ids.len()),
        ];
        for (field, got) in counts {
            if got != n {
                return Err(ProtocolError::Count {
                    field,
                    expected: n,
                    got,
                });
            }
        }
        let expected = n * self.obs_bytes();
        if batch.observations.len() != expected {
            return Err(ProtocolError::ByteLength {
                field: "observations",
                expected,
                got: batch.observations.len(),
            });
        }
        if let Some((position, &value)) = batch
            .rewards
            .iter()
            .enumerate()
            .find(|(_, r)| !r.is_finite())
        {
            return Err(ProtocolError::NonFiniteReward { position, value });
        }
        if let Some(position) = batch
            .terminated
            .iter()
            .zip(&batch.truncated)
            .position(|(&a, &b)| a && b)
        {
            return Err(ProtocolError::TerminatedAndTruncated { position });
        }
        if self.obs_dtype == ObsDType::F32 {
            if let Some(at) = first_non_finite_f32(&batch.observations) {
                let obs_len = self.obs_len().max(1);
                let (position, element) = (at / obs_len, at % obs_len);
                let b = &batch.observations[4 * at..4 * at + 4];
                return Err(ProtocolError::NonFiniteObservation {
                    position,
                    index: batch.env_indices[position],
                    element,
                    value: f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                });
            }
        }
        for (position, ep) in batch.episodes.iter().enumerate() {
            if ep.env_index >= num_envs {
                return Err(ProtocolError::EpisodeEnvOutOfRange {
                    position,
                    index: ep.env_index,
                    num_envs,
                });
            }
        }
        Ok(())
    }
}

/// Checks a continuous action space received from an actor.
fn box_from_proto(b: &pb::BoxSpace) -> Result<ActionSpace, ProtocolError> {
    let bad = |reason: String| ProtocolError::InvalidSpec {
        field: "spec.action_box",
        reason,
    };
    if b.shape.is_empty() || b.shape.contains(&0) {
        return Err(bad(format!(
            "shape {:?} must have at least one dimension, none zero",
            b.shape
        )));
    }
    let dim = b
        .shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d as usize))
        .filter(|&n| n <= MAX_ACTION_DIM)
        .ok_or_else(|| bad(format!("more than {MAX_ACTION_DIM} floats per action")))?;
    if b.low.len() != dim || b.high.len() != dim {
        return Err(bad(format!(
            "low and high need {dim} entries each (one per element), got {} and {}",
            b.low.len(),
            b.high.len()
        )));
    }
    for (i, (&lo, &hi)) in b.low.iter().zip(&b.high).enumerate() {
        if lo.is_nan() || hi.is_nan() || lo > hi {
            return Err(bad(format!(
                "element {i}: low {lo} and high {hi} are not a range"
            )));
        }
    }
    Ok(ActionSpace::Box {
        shape: b.shape.iter().map(|&d| d as usize).collect(),
        low: b.low.clone(),
        high: b.high.clone(),
    })
}

/// Index of the first non-finite little-endian f32 in `bytes` (whose length
/// is a multiple of 4), if any.
///
/// A float is NaN or infinite exactly when its 8 exponent bits are all ones.
/// The scan tests that for blocks of 64 floats with branch-free integer
/// masks (`(x & EXP) == EXP`, OR-ed), which the compiler turns into SIMD
/// compares even on baseline x86-64 (SSE2); only a block that has one is
/// searched element by element. Measured in `benches/benches/validation.rs`
/// against the f32 decode the serving path already does to these bytes.
pub fn first_non_finite_f32(bytes: &[u8]) -> Option<usize> {
    const EXP: u32 = 0x7f80_0000;
    const BLOCK: usize = 64;
    let word = |c: &[u8]| u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    let is_bad = |c: &[u8]| word(c) & EXP == EXP;
    let mut blocks = bytes.chunks_exact(4 * BLOCK);
    for (b, block) in blocks.by_ref().enumerate() {
        let mut any = 0u32;
        for c in block.chunks_exact(4) {
            any |= u32::from(word(c) & EXP == EXP);
        }
        if any != 0 {
            return block
                .chunks_exact(4)
                .position(is_bad)
                .map(|i| b * BLOCK + i);
        }
    }
    let done = (bytes.len() / (4 * BLOCK)) * BLOCK;
    blocks
        .remainder()
        .chunks_exact(4)
        .position(is_bad)
        .map(|i| done + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cartpole() -> EnvSpec {
        EnvSpec::cartpole()
    }

    fn good_batch(n: usize) -> pb::StepBatch {
        pb::StepBatch {
            seq: 1,
            env_indices: (0..n as u32).collect(),
            observations: vec![0u8; n * 16].into(),
            rewards: vec![1.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            run_ids: vec![7; n],
            episodes: vec![],
        }
    }

    #[test]
    fn spec_round_trips_through_proto() {
        let spec = cartpole();
        assert_eq!(EnvSpec::from_proto(&spec.to_proto()).unwrap(), spec);
        assert_eq!(spec.obs_bytes(), 16);
    }

    #[test]
    fn spec_rejects_unknown_dtype_empty_shape_and_zero_actions() {
        let mut p = cartpole().to_proto();
        p.obs_dtype = 0;
        assert!(matches!(
            EnvSpec::from_proto(&p),
            Err(ProtocolError::UnknownDType { .. })
        ));
        let mut p = cartpole().to_proto();
        p.obs_dtype = 99;
        assert!(matches!(
            EnvSpec::from_proto(&p),
            Err(ProtocolError::UnknownDType { .. })
        ));
        let mut p = cartpole().to_proto();
        p.obs_shape.clear();
        assert!(EnvSpec::from_proto(&p)
            .unwrap_err()
            .to_string()
            .contains("spec.obs_shape"));
        let mut p = cartpole().to_proto();
        p.obs_shape = vec![u32::MAX, u32::MAX];
        assert!(EnvSpec::from_proto(&p).is_err());
        let mut p = cartpole().to_proto();
        p.num_actions = 0;
        assert!(EnvSpec::from_proto(&p)
            .unwrap_err()
            .to_string()
            .contains("spec.num_actions"));
    }

    #[test]
    fn box_specs_round_trip_and_bad_boxes_are_named() {
        let spec = EnvSpec {
            env_name: "Pendulum-v1".into(),
            obs_shape: vec![3],
            obs_dtype: ObsDType::F32,
            action: ActionSpace::uniform_box(1, -2.0, 2.0),
        };
        assert_eq!(EnvSpec::from_proto(&spec.to_proto()).unwrap(), spec);
        assert_eq!(spec.num_actions(), None);
        assert_eq!(spec.action.dim(), 1);
        let mut p = spec.to_proto();
        p.num_actions = 3;
        let e = EnvSpec::from_proto(&p).unwrap_err().to_string();
        assert!(
            e.contains("spec.num_actions") && e.contains("action_box"),
            "{e}"
        );
        for (shape, low, high, says) in [
            (vec![], vec![], vec![], "shape"),
            (vec![2, 0], vec![], vec![], "shape"),
            (vec![2], vec![0.0], vec![1.0, 1.0], "low and high"),
            (vec![1], vec![1.0], vec![0.0], "element 0"),
            (vec![1], vec![f32::NAN], vec![0.0], "element 0"),
            (vec![1 << 20], vec![], vec![], "floats per action"),
        ] {
            let mut p = spec.to_proto();
            p.action_box = Some(pb::BoxSpace { shape, low, high });
            let e = EnvSpec::from_proto(&p).unwrap_err().to_string();
            assert!(e.contains("spec.action_box") && e.contains(says), "{e}");
        }
        // Infinite bounds are a range.
        let mut p = spec.to_proto();
        p.action_box = Some(pb::BoxSpace {
            shape: vec![2],
            low: vec![f32::NEG_INFINITY, -1.0],
            high: vec![f32::INFINITY, 1.0],
        });
        let open = EnvSpec::from_proto(&p).unwrap();
        let mut a = [5.0, 5.0];
        open.action.clip(&mut a);
        assert_eq!(a, [5.0, 1.0]);
    }

    #[test]
    fn differences_name_the_first_field_that_differs() {
        let a = cartpole();
        assert_eq!(a.difference(&a.clone()), None);
        let mut b = a.clone();
        b.obs_shape = vec![5];
        assert_eq!(a.difference(&b).unwrap().0, "spec.obs_shape");
        let mut b = a.clone();
        b.action = ActionSpace::Discrete(3);
        assert_eq!(
            a.difference(&b).unwrap(),
            ("spec.num_actions", "2".into(), "3".into())
        );
        b.action = ActionSpace::uniform_box(2, -1.0, 1.0);
        let (field, ours, theirs) = a.difference(&b).unwrap();
        assert_eq!(field, "spec.action_box");
        assert_eq!(
            (ours.as_str(), theirs.as_str()),
            ("Discrete(2)", "Box([2], -1..1)")
        );
        let mut b = a.clone();
        b.env_name = "other".into();
        assert_eq!(a.difference(&b).unwrap().0, "spec.env_name");
    }

    #[test]
    fn actions_are_checked_against_the_action_space() {
        let reply = |actions: Vec<u32>, continuous: Vec<f32>| pb::ActionBatch {
            seq: 0,
            actions,
            policy_version: 0,
            continuous_actions: continuous,
        };
        let d = cartpole();
        d.check_actions(&reply(vec![0, 1], vec![]), 2).unwrap();
        assert_eq!(
            d.check_actions(&reply(vec![0], vec![]), 2).unwrap_err().0,
            "actions"
        );
        assert_eq!(
            d.check_actions(&reply(vec![0, 2], vec![]), 2)
                .unwrap_err()
                .0,
            "actions"
        );
        assert_eq!(
            d.check_actions(&reply(vec![0, 1], vec![1.0]), 2)
                .unwrap_err()
                .0,
            "continuous_actions"
        );
        let mut c = cartpole();
        c.action = ActionSpace::uniform_box(2, -1.0, 1.0);
        // Unclipped samples are valid; the actor clips them.
        c.check_actions(&reply(vec![], vec![0.5, -3.0, 9.0, 0.0]), 2)
            .unwrap();
        assert_eq!(
            c.check_actions(&reply(vec![], vec![0.5, -3.0, 9.0]), 2)
                .unwrap_err()
                .0,
            "continuous_actions"
        );
        assert_eq!(
            c.check_actions(&reply(vec![], vec![0.5, f32::NAN, 9.0, 0.0]), 2)
                .unwrap_err()
                .0,
            "continuous_actions"
        );
        assert_eq!(
            c.check_actions(&reply(vec![1, 1], vec![0.0; 4]), 2)
                .unwrap_err()
                .0,
            "actions"
        );
    }

    #[test]
    fn valid_batch_passes() {
        cartpole().validate_step_batch(&good_batch(3), 3).unwrap();
    }

    #[test]
    fn each_bad_field_is_named() {
        let spec = cartpole();
        let mut b = good_batch(2);
        b.observations = vec![0u8; 31].into();
        let e = spec.validate_step_batch(&b, 2).unwrap_err();
        assert!(e.to_string().contains("observations"), "{e}");

        let mut b = good_batch(2);
        b.rewards[1] = f32::NAN;
        let e = spec.validate_step_batch(&b, 2).unwrap_err();
        assert!(e.to_string().contains("rewards[1]"), "{e}");

        let mut b = good_batch(2);
        b.rewards[0] = f32::INFINITY;
        assert!(matches!(
            spec.validate_step_batch(&b, 2),
            Err(ProtocolError::NonFiniteReward { position: 0, .. })
        ));

        let mut b = good_batch(2);
        b.env_indices[1] = 5;
        let e = spec.validate_step_batch(&b, 2).unwrap_err();
        assert!(e.to_string().contains("env_indices[1]"), "{e}");

        let mut b = good_batch(2);
        b.env_indices[1] = 0;
        assert!(matches!(
            spec.validate_step_batch(&b, 2),
            Err(ProtocolError::DuplicateEnvIndex { .. })
        ));

        let mut b = good_batch(2);
        b.truncated.pop();
        let e = spec.validate_step_batch(&b, 2).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");

        let b = good_batch(0);
        assert_eq!(
            spec.validate_step_batch(&b, 2),
            Err(ProtocolError::EmptyBatch)
        );
    }

    #[test]
    fn non_finite_observations_and_both_flags_are_named() {
        let spec = cartpole();
        for (bad, env, element) in [
            (f32::NAN, 0, 0),
            (f32::INFINITY, 1, 3),
            (f32::NEG_INFINITY, 2, 2),
            (-f32::NAN, 2, 3),
        ] {
            let mut b = good_batch(3);
            b.env_indices = vec![2, 0, 1];
            let mut obs = b.observations.to_vec();
            let at = 4 * (env * 4 + element);
            obs[at..at + 4].copy_from_slice(&bad.to_le_bytes());
            b.observations = obs.into();
            let e = spec.validate_step_batch(&b, 3).unwrap_err();
            assert!(
                matches!(e, ProtocolError::NonFiniteObservation { position, index, element: el, .. }
                    if position == env && index == b.env_indices[env] && el == element),
                "{e:?}"
            );
            let msg = e.to_string();
            assert!(msg.contains("`observations`"), "{msg}");
            assert!(msg.contains(&format!("env_indices[{env}]")), "{msg}");
        }
        // Large finite values and subnormals are fine.
        let mut b = good_batch(2);
        let mut obs = b.observations.to_vec();
        obs[0..4].copy_from_slice(&f32::MAX.to_le_bytes());
        obs[4..8].copy_from_slice(&f32::MIN_POSITIVE.to_le_bytes());
        obs[8..12].copy_from_slice(&(f32::MIN_POSITIVE / 2.0).to_le_bytes());
        b.observations = obs.into();
        spec.validate_step_batch(&b, 2).unwrap();

        let mut b = good_batch(3);
        b.terminated[1] = true;
        b.truncated[2] = true;
        spec.validate_step_batch(&b, 3).unwrap();
        b.truncated[1] = true;
        let e = spec.validate_step_batch(&b, 3).unwrap_err();
        assert_eq!(e, ProtocolError::TerminatedAndTruncated { position: 1 });
        assert!(e.to_string().contains("`terminated[1]`"), "{e}");
    }

    #[test]
    fn u8_observations_are_not_checked_for_finiteness() {
        let spec = EnvSpec::synthetic(vec![4], ObsDType::U8, 2);
        let mut b = good_batch(1);
        b.observations = vec![0xff; 4].into();
        spec.validate_step_batch(&b, 1).unwrap();
    }

    proptest::proptest! {
        #[test]
        fn the_block_scan_finds_the_first_non_finite_float(
            values in proptest::collection::vec(
                proptest::prop_oneof![
                    8 => proptest::num::f32::NORMAL | proptest::num::f32::SUBNORMAL | proptest::num::f32::ZERO,
                    1 => proptest::num::f32::INFINITE | proptest::num::f32::QUIET_NAN | proptest::num::f32::SIGNALING_NAN,
                ],
                0..200,
            )
        ) {
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            let naive = values.iter().position(|v| !v.is_finite());
            proptest::prop_assert_eq!(first_non_finite_f32(&bytes), naive);
        }
    }

    #[test]
    fn duplicates_detected_with_many_envs() {
        let spec = cartpole();
        let mut b = good_batch(300);
        b.env_indices[299] = 250;
        assert!(matches!(
            spec.validate_step_batch(&b, 300),
            Err(ProtocolError::DuplicateEnvIndex { index: 250, .. })
        ));
    }
}
