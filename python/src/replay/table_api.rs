//! The one list of a replay table's Python methods ([`table_methods!`]) and
//! everything made from it: the [`TableApi`] trait, whose two
//! implementations hold the bodies (the in-process table,
//! `Arc<LocalTable>`, and a server's, `RemoteTable`); the `#[pymethods]` of
//! `ReplayBuffer` and `ReplayTable` ([`table_pymethods!`]), which delegate
//! to them; `ReplayClient`'s table methods, the same signatures with
//! `table` first ([`client_pymethods!`]); and the names Python sees as
//! `seed_rs._native.TABLE_METHODS` and `CLIENT_TABLE_METHODS`
//! ([`TABLE_METHODS`], [`CLIENT_TABLE_METHODS`]), which `seed_rs.ray`'s
//! `ReplayHandle` forwards and the tests walk.
//!
//! Why a list and not only a trait: a Python method's name, docstring and
//! signature (`#[pyo3(signature)]`, and from it `__text_signature__`) are
//! written on each class's own `#[pymethods]` block, and pyo3 allows one
//! block per class (without its `multiple-pymethods` feature), so the
//! generators take each class's other items (constructors, `__repr__`) and
//! emit the one block. Adding a method is one entry here and one body in
//! each implementation (the compiler asks for both), plus its line in
//! `_native.pyi` (a test compares).
//!
//! # An entry
//! Its docs (the docstring of every class's method), then
//! `kind name (Python signature) (Rust parameters) -> return type;`, the
//! parameters' types as pyo3 extracts them, `'py` the GIL's lifetime. The
//! kinds:
//! - `property`: a read-only attribute (no parameters, no `py`);
//! - `call`: a method of every table that the client has too, with the
//!   table's name first;
//! - `own`: a method of tables only (`info`, which the client has as
//!   `info(table=None)`, every table's at once; `close`).
//!
//! The list's types are named as pyo3's prelude and `pyo3::types` name
//! them: a module that expands a generator imports `pyo3::prelude::*` and
//! `pyo3::types::{PyDict, PyTuple}`.
//!
//! Cost: none at run time; each generated method is one call of the trait
//! method.
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// Calls `$generate! { { $args } <the list> }`: the list of a table's
/// methods, each entry as the module docs describe it.
macro_rules! table_methods {
    ($generate:ident { $($args:tt)* }) => {
        $generate! {
            { $($args)* }

            /// The table's name.
            property name -> &str;

            /// Inserts one batch and returns its keys (a `uint64` array,
            /// one per row, in row order). `fields` maps every field of the
            /// table to a C-contiguous array of the table's dtype shaped
            /// `[rows, *field_shape]` (numpy, or anything with `__dlpack__`
            /// or the buffer protocol, read without a copy; no casts: a
            /// wrong dtype or shape, a missing or unknown field is a
            /// `ValueError` naming it); a variable-length field (`[-1]`)
            /// takes a list of one array per row or `(values, offsets)`.
            /// `priorities` (prioritized tables) and `policy_versions` give
            /// one value per row; with `policy_versions`, leave the table's
            /// policy-version field out.
            call insert (fields, priorities=None, policy_versions=None) (
                fields: &Bound<'py, PyDict>,
                priorities: Option<&Bound<'py, PyAny>>,
                policy_versions: Option<&Bound<'py, PyAny>>
            ) -> Bound<'py, PyAny>;

            /// Samples `batch_size` items: returns `(fields, keys,
            /// weights)`, `fields` a dict of new arrays shaped
            /// `[batch_size, *field_shape]` (fewer rows only when the lag
            /// cap dropped items, or an item's token values were
            /// overwritten while they were read), a variable-length field
            /// `(values, offsets)` (read-only arrays, `seed_rs.pad` pads
            /// them), `keys` `uint64`, `weights` the
            /// importance weights (`float32`; 1 unless prioritized). Waits
            /// for enough items (and the rate limiter) for ever, or
            /// `timeout` seconds (then `ReplayError` `DEADLINE_EXCEEDED`),
            /// without the GIL.
            call sample (batch_size, timeout=None) (
                batch_size: u32,
                timeout: Option<f64>
            ) -> Bound<'py, PyTuple>;

            /// An iterator of `(fields, keys, weights)` batches of
            /// `batch_size`, as `sample` returns them, ending after
            /// `max_batches` (0: never); `close()` ends it early. On a
            /// server, the server prepares up to `max_in_flight` batches
            /// (0: its default; at most 16) ahead of the reader, so the
            /// next batch usually costs no round trip; in process there is
            /// no round trip to hide and `max_in_flight` is not used.
            call sample_stream (batch_size, *, max_batches=0, max_in_flight=0, timeout=None) (
                batch_size: u32,
                max_batches: u64,
                max_in_flight: u32,
                timeout: Option<f64>
            ) -> Bound<'py, PyAny>;

            /// Sets the priorities of `keys` (one finite, non-negative
            /// priority per key) in a prioritized table. Returns
            /// `{"applied", "stale", "invalid"}`: `stale` counts keys that
            /// name no stored item (overwritten since).
            call update_priorities (keys, priorities) (
                keys: &Bound<'py, PyAny>,
                priorities: &Bound<'py, PyAny>
            ) -> Bound<'py, PyDict>;

            /// Sets the learner's current policy version (the lag cap
            /// measures items against it).
            call set_policy_version (version) (version: u64) -> ();

            /// The table's info dict: fields, sampler, capacity, sizes,
            /// counters, rate limiter, storage.
            own info () () -> Bound<'py, PyDict>;

            /// Writes the table's checkpoint, `<checkpoint_dir>/<name>.seedrpl`
            /// (in process the buffer's `checkpoint_dir`; on a server the
            /// server's, on its file system) while inserts and samples go
            /// on, and returns `{"path", "items", "bytes"}` once the file
            /// is complete; `ReplayBuffer.restore` reads it back.
            call checkpoint () () -> Bound<'py, PyDict>;

            /// Grouped tables: appends steps to their trajectories. One row
            /// per step: `trajectory_ids[i]`, `group_ids[i]` (integers, or
            /// strings for a table with `str` ids), the row of every field
            /// of `fields` (a fixed-shape one as for `insert`, one step's
            /// layout; a variable-length one a list of one array per step
            /// or `(values, offsets)`), `policy_versions[i]` (default 0),
            /// `is_last[i]` (default false: the trajectory goes on) and
            /// `metadata[i]` (bytes, str or a JSON-able object; default
            /// none). Returns `{"groups_completed",
            /// "groups_dropped_over_capacity", "groups_dropped_queue_full"}`.
            /// With `wait=False` (a server's table) it returns `None` once
            /// the steps are sent, without waiting for the server: up to 8
            /// submits are in flight on the handle's stream, and a refusal
            /// of one of them is raised by a later submit or by
            /// `flush_submits()` (the submits sent after a refused one are
            /// not stored). In process the steps are stored before it
            /// returns either way.
            call submit_steps (trajectory_ids, group_ids, fields, policy_versions=None, is_last=None, metadata=None, wait=true) (
                trajectory_ids: &Bound<'py, PyAny>,
                group_ids: &Bound<'py, PyAny>,
                fields: &Bound<'py, PyDict>,
                policy_versions: Option<&Bound<'py, PyAny>>,
                is_last: Option<&Bound<'py, PyAny>>,
                metadata: Option<&Bound<'py, PyAny>>,
                wait: bool
            ) -> Option<Bound<'py, PyDict>>;

            /// Grouped tables: waits until every `submit_steps(...,
            /// wait=False)` of this handle was answered; returns their
            /// counts summed (as `submit_steps` returns one submit's) and
            /// raises the first refusal among them.
            call flush_submits () () -> Bound<'py, PyDict>;

            /// Grouped tables: appends one step, `step` mapping each field
            /// to that step's value (an array of one step's shape; a
            /// variable-length field's one array or list), as
            /// `submit_steps` with one row.
            call submit_step (trajectory_id, group_id, step, policy_version=0, is_last=false, metadata=None) (
                trajectory_id: &Bound<'py, PyAny>,
                group_id: &Bound<'py, PyAny>,
                step: &Bound<'py, PyDict>,
                policy_version: u64,
                is_last: bool,
                metadata: Option<&Bound<'py, PyAny>>
            ) -> Bound<'py, PyDict>;

            /// Grouped tables: ends trajectory `trajectory_id` (an integer,
            /// or a string for a table with `str` ids) without a last step;
            /// returns whether that completed its group.
            call complete_trajectory (trajectory_id) (trajectory_id: &Bound<'py, PyAny>) -> bool;

            /// Grouped tables: the oldest complete group, whole, taken out
            /// of the table: `{"group_id", "trajectory_ids", "lengths",
            /// "fields", "policy_versions", "lags", "policy_version",
            /// "metadata"}`, each fixed-shape field one array of all its
            /// trajectories' steps one after another (`lengths` splits
            /// them), each variable-length field `(values, offsets)`
            /// (`seed_rs.pad` pads it), `lags` each step's lag behind the
            /// table's `policy_version`, `metadata` a list of bytes per step
            /// (`None` when no step had any). Waits up to `timeout` seconds
            /// (`None`: for ever; 0: not at all) without the GIL; `None`
            /// when no group was ready in time.
            call fetch_group (timeout=None) (timeout: Option<f64>) -> Option<Bound<'py, PyDict>>;

            /// `fetch_group` by the trajectory-pool design's name.
            call fetch_batch (timeout=None) (timeout: Option<f64>) -> Option<Bound<'py, PyDict>>;

            /// Every item inserted from key `cursor` on (0: every item
            /// still stored), in key order: an iterator of dicts, `{"keys",
            /// "fields", "policy_versions", "next_key", "head_key",
            /// "replaced"}` for items, or `{"gap": (requested, oldest)}`
            /// when the keys from `requested` to `oldest` were overwritten
            /// before they could be read. It never ends by itself;
            /// `close()` ends it. `max_batch`: items per dict at most (0:
            /// the server's default); `max_in_flight`: dicts a server
            /// prepares ahead (0: its default; at most 16; in process none
            /// are).
            call follow (cursor=0, *, max_batch=0, max_in_flight=0) (
                cursor: u64,
                max_batch: u32,
                max_in_flight: u32
            ) -> Bound<'py, PyAny>;

            /// Closes. In process, the table: waiting calls wake with
            /// `ReplayError` `UNAVAILABLE` and later ones fail the same
            /// way; a mapped table's pages are written back. A server's
            /// table handle ends only itself (the connection is the
            /// client's): its later calls raise `RuntimeError`. Idempotent.
            own close () () -> ();
        }
    };
}
pub(crate) use table_methods;

/// The trait of the list: `{ }` then the list (see [`table_methods!`]).
macro_rules! table_trait {
    ({} $($list:tt)*) => {
        $crate::replay::table_api::table_trait!(@munch [] $($list)*);
    };
    (@munch [$($out:tt)*]) => {
        /// A table's methods (the list of [`table_methods!`]), implemented
        /// by the in-process table and by a server's.
        pub trait TableApi {
            $($out)*
        }
    };
    (@munch [$($out:tt)*]
        $(#[$doc:meta])* property $name:ident -> $ret:ty; $($rest:tt)*) => {
        $crate::replay::table_api::table_trait!(@munch [$($out)*
            $(#[$doc])*
            fn $name(&self) -> $ret;
        ] $($rest)*);
    };
    (@munch [$($out:tt)*]
        $(#[$doc:meta])* $kind:ident $name:ident ($($sig:tt)*) ($($p:ident : $t:ty),*) -> $ret:ty;
        $($rest:tt)*) => {
        $crate::replay::table_api::table_trait!(@munch [$($out)*
            $(#[$doc])*
            // Python's signatures decide the count (`submit_step`).
            #[allow(clippy::too_many_arguments)]
            fn $name<'py>(&self, py: Python<'py>, $($p: $t),*) -> PyResult<$ret>;
        ] $($rest)*);
    };
}
pub(crate) use table_trait;

/// The `#[pymethods]` of a table class: `{ Class, field, { other items } }`
/// then the list. Each method calls [`TableApi`]'s of `self.field`; the
/// context manager (`with table: ...` closes it on the way out) is every
/// table's too.
macro_rules! table_pymethods {
    ({ $class:ty, $field:ident, { $($extra:tt)* } } $($list:tt)*) => {
        $crate::replay::table_api::table_pymethods!(@munch $class, $field, [$($extra)*
            fn __enter__(slf: Py<Self>) -> Py<Self> {
                slf
            }

            #[pyo3(signature = (*_args))]
            fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
                $crate::replay::table_api::TableApi::close(&self.$field, py)?;
                Ok(false)
            }
        ] $($list)*);
    };
    (@munch $class:ty, $field:ident, [$($out:tt)*]) => {
        #[pymethods]
        impl $class {
            $($out)*
        }
    };
    (@munch $class:ty, $field:ident, [$($out:tt)*]
        $(#[$doc:meta])* property $name:ident -> $ret:ty; $($rest:tt)*) => {
        $crate::replay::table_api::table_pymethods!(@munch $class, $field, [$($out)*
            $(#[$doc])*
            #[getter]
            fn $name(&self) -> $ret {
                $crate::replay::table_api::TableApi::$name(&self.$field)
            }
        ] $($rest)*);
    };
    (@munch $class:ty, $field:ident, [$($out:tt)*]
        $(#[$doc:meta])* $kind:ident $name:ident ($($sig:tt)*) ($($p:ident : $t:ty),*) -> $ret:ty;
        $($rest:tt)*) => {
        $crate::replay::table_api::table_pymethods!(@munch $class, $field, [$($out)*
            $(#[$doc])*
            #[pyo3(signature = ($($sig)*))]
            // Python's signatures decide the count (`submit_step`).
            #[allow(clippy::too_many_arguments)]
            fn $name<'py>(&self, py: Python<'py>, $($p: $t),*) -> PyResult<$ret> {
                $crate::replay::table_api::TableApi::$name(&self.$field, py, $($p),*)
            }
        ] $($rest)*);
    };
}
pub(crate) use table_pymethods;

/// The `#[pymethods]` of the client: `{ Class, table_of, { other items } }`
/// then the list. Each `call` entry becomes a method with `table` first
/// that calls [`TableApi`]'s of `self.table_of(table)`.
macro_rules! client_pymethods {
    ({ $class:ty, $table_of:ident, { $($extra:tt)* } } $($list:tt)*) => {
        $crate::replay::table_api::client_pymethods!(@munch $class, $table_of, [$($extra)*] $($list)*);
    };
    (@munch $class:ty, $table_of:ident, [$($out:tt)*]) => {
        #[pymethods]
        impl $class {
            $($out)*
        }
    };
    (@munch $class:ty, $table_of:ident, [$($out:tt)*]
        $(#[$doc:meta])* call $name:ident ($($sig:tt)*) ($($p:ident : $t:ty),*) -> $ret:ty;
        $($rest:tt)*) => {
        $crate::replay::table_api::client_pymethods!(@munch $class, $table_of, [$($out)*
            $(#[$doc])*
            #[doc = ""]
            #[doc = "On the client, `table` (the table's name) comes first."]
            #[pyo3(signature = (table, $($sig)*))]
            // `self`, `py`, `table` and the entry's parameters.
            #[allow(clippy::too_many_arguments)]
            fn $name<'py>(&self, py: Python<'py>, table: String, $($p: $t),*) -> PyResult<$ret> {
                $crate::replay::table_api::TableApi::$name(&self.$table_of(table), py, $($p),*)
            }
        ] $($rest)*);
    };
    // `property` and `own` entries: tables only.
    (@munch $class:ty, $table_of:ident, [$($out:tt)*]
        $(#[$doc:meta])* $kind:ident $name:ident $($entry:tt)*) => {
        $crate::replay::table_api::client_pymethods!(@skip $class, $table_of, [$($out)*] $($entry)*);
    };
    (@skip $class:ty, $table_of:ident, [$($out:tt)*] ; $($rest:tt)*) => {
        $crate::replay::table_api::client_pymethods!(@munch $class, $table_of, [$($out)*] $($rest)*);
    };
    (@skip $class:ty, $table_of:ident, [$($out:tt)*] $skipped:tt $($rest:tt)*) => {
        $crate::replay::table_api::client_pymethods!(@skip $class, $table_of, [$($out)*] $($rest)*);
    };
}
pub(crate) use client_pymethods;

/// The names of the list: `{ }` then the list.
macro_rules! method_names {
    ({} $($list:tt)*) => {
        $crate::replay::table_api::method_names!(@munch [] [] $($list)*);
    };
    (@munch [$($all:tt)*] [$($client:tt)*]) => {
        /// Every name of the list, in its order (`seed_rs._native.TABLE_METHODS`).
        pub const TABLE_METHODS: &[&str] = &[$($all)*];
        /// The names the client has with `table` first
        /// (`seed_rs._native.CLIENT_TABLE_METHODS`).
        pub const CLIENT_TABLE_METHODS: &[&str] = &[$($client)*];
    };
    (@munch [$($all:tt)*] [$($client:tt)*]
        $(#[$doc:meta])* property $name:ident -> $ret:ty; $($rest:tt)*) => {
        $crate::replay::table_api::method_names!(@munch [$($all)* stringify!($name),] [$($client)*] $($rest)*);
    };
    (@munch [$($all:tt)*] [$($client:tt)*]
        $(#[$doc:meta])* call $name:ident ($($sig:tt)*) ($($p:ident : $t:ty),*) -> $ret:ty;
        $($rest:tt)*) => {
        $crate::replay::table_api::method_names!(@munch
            [$($all)* stringify!($name),] [$($client)* stringify!($name),] $($rest)*);
    };
    (@munch [$($all:tt)*] [$($client:tt)*]
        $(#[$doc:meta])* own $name:ident ($($sig:tt)*) ($($p:ident : $t:ty),*) -> $ret:ty;
        $($rest:tt)*) => {
        $crate::replay::table_api::method_names!(@munch [$($all)* stringify!($name),] [$($client)*] $($rest)*);
    };
}
pub(crate) use method_names;

table_methods!(table_trait {});
table_methods!(method_names {});
