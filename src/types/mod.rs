//! Shared value types at the bottom of the layer order: model names, durations, token
//! usage, how runs end, and private text. They import nothing else from the crate.

pub mod action_token;
pub mod duration;
pub mod event_outcome;
pub mod jira_restriction;
pub mod model_ref;
pub mod outcome;
pub mod private;
pub mod reasoning;
pub mod seal;
pub mod usage;

pub use action_token::ActionToken;
pub use model_ref::ModelRef;
pub use outcome::{RunOutcome, RunStatus, Termination};
pub use private::{Privacy, Private};
pub use reasoning::ReasoningSpec;
pub use usage::Usage;
