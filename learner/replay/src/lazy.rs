//! [`LazyReplayBuffer`]: a buffer whose layout is taken from the first
//! inserted item (like TorchRL's `Lazy*Storage`).
//!
//! Why: generic code (tests, tools) may not know the item shapes up front.
//! Cost: one `OnceLock` load per call; storage is allocated on first insert.
use std::sync::OnceLock;

use crate::batch::SampleBatch;
use crate::buffer::{ReplayBuffer, ReplayConfig};
use crate::error::{InsertError, ReplayError};
use crate::item::Item;
use crate::item_key::ItemKey;

#[derive(Debug)]
pub struct LazyReplayBuffer {
    config: ReplayConfig,
    /// Field of the first item to name as the policy-version field.
    policy_version_field: Option<String>,
    buffer: OnceLock<ReplayBuffer>,
}

impl LazyReplayBuffer {
    /// Validates `config` now; allocates nothing until the first insert.
    /// A policy-lag cap is refused here: it needs a policy-version field,
    /// which [`with_policy_version_field`](Self::with_policy_version_field)
    /// names.
    pub fn new(config: ReplayConfig) -> Result<Self, ReplayError> {
        config.validate()?;
        if config.policy_lag.is_some() {
            return Err(ReplayError::config(
                "a policy-lag cap needs a policy-version field: \
                 use LazyReplayBuffer::with_policy_version_field",
            ));
        }
        Ok(LazyReplayBuffer {
            config,
            policy_version_field: None,
            buffer: OnceLock::new(),
        })
    }

    /// Like [`new`](Self::new), with the first item's field `name` (a `U64`
    /// scalar, checked on that insert) as the policy-version field the lag
    /// cap reads.
    pub fn with_policy_version_field(
        config: ReplayConfig,
        name: &str,
    ) -> Result<Self, ReplayError> {
        config.validate()?;
        Ok(LazyReplayBuffer {
            config,
            policy_version_field: Some(name.to_owned()),
            buffer: OnceLock::new(),
        })
    }

    /// The underlying buffer once the first item arrived.
    pub fn get(&self) -> Option<&ReplayBuffer> {
        self.buffer.get()
    }

    /// Inserts `item`; the first item fixes the layout (fields in its order).
    pub fn insert(&self, item: Item) -> Result<ItemKey, InsertError<Item>> {
        if self.buffer.get().is_none() {
            let made = item
                .layout_with_policy_version(self.policy_version_field.as_deref())
                .and_then(|layout| ReplayBuffer::new(layout, self.config.clone()));
            match made {
                // Another thread may have won the race; its layout stands.
                Ok(b) => drop(self.buffer.set(b)),
                Err(error) => return Err(InsertError { error, item }),
            }
        }
        match self.buffer.get() {
            Some(b) => b.insert(item),
            None => Err(InsertError {
                error: ReplayError::config("lazy buffer failed to initialise"),
                item,
            }),
        }
    }

    /// Samples like [`ReplayBuffer::sample_into`]; `NotEnoughItems` before
    /// the first insert.
    pub fn sample_into(&self, batch: &mut SampleBatch, n: usize) -> Result<(), ReplayError> {
        match self.buffer.get() {
            Some(b) => b.sample_into(batch, n),
            None => Err(ReplayError::NotEnoughItems {
                requested: n,
                available: 0,
            }),
        }
    }
}
