//! Sealed values from before values were bound to their row (before 2026-11-27): they
//! opened in whichever row a database writer moved them to. `steward reseal`, run once
//! by the operator after upgrading, seals each again bound to the row it is in
//! ([`bind_unbound`]). `serve` never binds (a writer who kept an old value could plant it
//! in any row and have the next start bind it there); at start-up it only counts what
//! would not open, says so, and erases the sealed content of events nothing will read
//! again ([`at_start`]).

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

/// Binds every unbound sealed value in `store` to its row (`steward reseal`; see the
/// module's documentation). A value its row changed under meanwhile (a run ended and
/// erased it) is left to that change.
pub async fn bind_unbound(store: &dyn Store, key: &DataKey) -> Result<Resealed, StoreError> {
    let mut done = Resealed::default();
    for value in store.sealed_values().await? {
        if opens_where_it_is(&value, key) {
            continue;
        }
        let place = place_of(&value);
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

/// At `serve`'s start: erases the sealed content nothing will read again and counts
/// the values that do not open where they are (unbound ones among them), warning with
/// what to do. Errors are reported, not fatal.
pub async fn at_start(store: &dyn Store, key: &DataKey) {
    let values = match store.sealed_values().await {
        Ok(values) => values,
        Err(e) => return tracing::error!(error = %e, "cannot check sealed values at start-up"),
    };
    let (mut unbound, mut unreadable) = (0, 0);
    for value in &values {
        if opens_where_it_is(value, key) {
            continue;
        }
        match key.open_unbound(&value.bytes) {
            Ok(_) => unbound += 1,
            Err(_) => unreadable += 1,
        }
    }
    if unbound > 0 {
        tracing::warn!(
            values = unbound,
            "sealed values from before 2026-11-27 are not bound to their rows and will not open; run `steward reseal` once"
        );
    }
    if unreadable > 0 {
        tracing::warn!(
            values = unreadable,
            "sealed values do not open under STEWARD_DATA_KEY (sealed under another key, or damaged)"
        );
    }
}

/// Whether `value` opens at its row, or is a plain checkpoint (not sealed at all).
fn opens_where_it_is(value: &SealedValue, key: &DataKey) -> bool {
    // A checkpoint of a run that held nothing private is plain JSON.
    (value.kind == SealedKind::Checkpoint
        && serde_json::from_slice::<serde::de::IgnoredAny>(&value.bytes).is_ok())
        || key.open_at(&place_of(value), &value.bytes).is_ok()
}
