//! Policy and value networks.
