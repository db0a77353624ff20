//! Reinforcement-learning algorithms.
