//! [`LazyReplayBuffer`]: a buffer whose layout is taken from the first
//! inserted item (like TorchRL's `Lazy*Storage`).
//!
//! Why: generic code (tests, tools) may not know the item shapes up front.
//! Cost: one `OnceLock` load per call; storage is allocated on first insert.
use std::sync::OnceLock;

use super::batch::SampleBatch;
use super::buffer::{ReplayBuffer, ReplayConfig};
use super::error::{InsertError, ReplayError};
use super::item::Item;
use super::ItemKey;

#[derive(Debug)]
pub struct LazyReplayBuffer {
    config: ReplayConfig,
    buffer: OnceLock<ReplayBuffer>,
}

impl LazyReplayBuffer {
    /// Validates `config` now; allocates nothing until the first insert.
    pub fn new(config: ReplayConfig) -> Result<Self, ReplayError> {
        config.validate()?;
        Ok(LazyReplayBuffer {
            config,
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
                .layout()
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
