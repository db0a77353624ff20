//! The service's table calls without the network: what the Python
//! package's in-process buffer (`seed_rs.ReplayBuffer`) runs, so that a
//! table behaves the same, checks and refusals included, whether a
//! `replay-server` serves it or it lives in the caller's process.
//!
//! A plain table is a [`Table`](super::Table) (built by
//! [`Table::open`](super::Table::open) from the same checked config) whose
//! buffer the caller inserts into and samples from directly; its `Info`
//! and checkpoint are [`table_info`] and
//! [`Table::checkpoint`](super::Table::checkpoint). A grouped table is a
//! [`GroupedTable`](super::GroupedTable) driven through the same request
//! functions as the RPCs: [`submit_steps`], [`complete_trajectory`],
//! [`fetch_group`] and [`grouped_table_info`]. Their errors are the
//! `tonic::Status` a client would receive. An in-process follower starts
//! from the `Follow` request's checks ([`follow_plan`]) and names
//! overwritten slots as the stream does ([`replaced_keys`]).
pub use super::follow_stream::{plan as follow_plan, replaced_keys, FollowPlan};
pub use super::group_calls::{
    complete_trajectory, fetch_group, submit_steps, table_info as grouped_table_info,
};
pub use super::service::table_info;
