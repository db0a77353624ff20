//! Replay buffer (to be written).
