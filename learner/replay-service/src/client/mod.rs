//! The Rust client of the replay service: [`ReplayClient`] (insert, sample,
//! update priorities, set the policy version, info, checkpoint, follow), the
//! [`InsertBatch`] it sends and the [`SampledBatch`] it receives; for
//! grouped tables `submit_steps` ([`StepBatch`]), `complete_trajectory`
//! and `fetch_group` ([`FetchedGroup`]). Every received batch reads its
//! field blocks through [`FieldBlocks`] (import it to call `field`).
//!
//! One `ReplayClient` is one HTTP/2 connection; clone it to share the
//! connection between tasks (calls are multiplexed). For throughput, keep
//! one [`Inserter`] stream per writer with several batches in flight, and
//! one [`SampleStream`] per reader: the server prepares the next batches
//! while the client works on the last.
mod field_blocks;
mod follow_stream;
mod grouped;
mod insert_batch;
mod ordered_stream;
mod replay_client;
mod sampled_batch;
mod step_submitter;

pub use field_blocks::FieldBlocks;
pub use follow_stream::{FollowEvent, FollowOptions, FollowStream, FollowedBatch};
pub use grouped::{FetchedGroup, StepBatch, SubmitReport};
pub use insert_batch::InsertBatch;
pub use replay_client::{
    ClientOptions, InsertedKeys, Inserter, PriorityReport, ReplayClient, SampleOptions,
    SampleStream,
};
pub use sampled_batch::SampledBatch;
pub use step_submitter::StepSubmitter;
