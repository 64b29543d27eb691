//! Shared value types at the bottom of the layer order: model names, durations and
//! token usage. They import nothing else from the crate.

pub mod duration;
pub mod model_ref;
pub mod usage;

pub use model_ref::ModelRef;
pub use usage::Usage;
