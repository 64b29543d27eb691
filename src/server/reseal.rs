//! Sealed values at start-up, before the dispatcher opens any: a value sealed before
//! values were bound to their row (before 2026-11-27) opened in whichever row a database
//! writer moved it to, so it is sealed again bound to the row it is in; and the sealed
//! content of events nothing will read again (a process stopped between a run's end
//! and its erasing) is erased. Nothing opens an unbound value after this pass.

use crate::store::{SealedKind, SealedValue, Store, StoreError};
use crate::types::seal::DataKey;

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Resealed {
    /// Values sealed again, bound to their row.
    pub bound: usize,
    /// Values that open neither at their row nor unbound: sealed under another key, or
    /// damaged. Left as they are; what reads them fails as it would have.
    pub unreadable: usize,
}

/// Where `value`'s seal is bound.
fn place_of(value: &SealedValue) -> String {
    match value.kind {
        SealedKind::Event => super::ingest::sealed_event_place(&value.owner),
        SealedKind::Checkpoint => crate::run::approval::checkpoint_place(&value.owner),
    }
}

/// Binds every unbound sealed value in `store` to its row (see the module's
/// documentation). A value its row changed under meanwhile (a run ended and erased
/// it) is left to that change.
pub async fn bind_unbound(store: &dyn Store, key: &DataKey) -> Result<Resealed, StoreError> {
    let mut done = Resealed::default();
    for value in store.sealed_values().await? {
        // A checkpoint of a run that held nothing private is plain JSON.
        if value.kind == SealedKind::Checkpoint
            && serde_json::from_slice::<serde::de::IgnoredAny>(&value.bytes).is_ok()
        {
            continue;
        }
        let place = place_of(&value);
        if key.open_at(&place, &value.bytes).is_ok() {
            continue;
        }
        let Ok(plain) = key.open_unbound(&value.bytes) else {
            done.unreadable += 1;
            continue;
        };
        match key.seal_at(&place, &plain) {
            Ok(bound) => {
                if store.replace_sealed(&value, &bound).await? {
                    done.bound += 1;
                }
            }
            Err(e) => {
                tracing::warn!(row = %value.id, error = %e, "cannot seal a value again; it stays unbound and will not open")
            }
        }
    }
    Ok(done)
}

/// [`bind_unbound`], logged: at start-up, errors are reported, not fatal (a value left
/// unbound only fails to open).
pub async fn at_start(store: &dyn Store, key: &DataKey) {
    match bind_unbound(store, key).await {
        Ok(Resealed { bound, unreadable }) => {
            if bound > 0 {
                tracing::info!(
                    values = bound,
                    "bound sealed values from before 2026-11-27 to their rows"
                );
            }
            if unreadable > 0 {
                tracing::warn!(
                    values = unreadable,
                    "sealed values do not open under STEWARD_DATA_KEY (sealed under another key, or damaged)"
                );
            }
        }
        Err(e) => tracing::error!(error = %e, "cannot check sealed values at start-up"),
    }
}
