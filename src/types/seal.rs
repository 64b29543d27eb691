//! Private text at rest: sealed with ChaCha20-Poly1305 (ring) under the operator's
//! `STEWARD_DATA_KEY`, so whichever process claims a private run can read its input
//! while the database only ever holds ciphertext.

use ring::aead::{CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// The 32-byte data key. Never printed.
#[derive(Clone)]
pub struct DataKey(Vec<u8>);

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataKey(…)")
    }
}

/// Sealing or opening failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("STEWARD_DATA_KEY must be 32 bytes, base64-encoded (e.g. `openssl rand -base64 32`)")]
    BadKey,
    #[error("sealed data is damaged or was sealed under another key")]
    Open,
    #[error("no randomness available for a nonce")]
    Random,
}

impl DataKey {
    /// From base64 text (standard alphabet, padding optional).
    pub fn parse(text: &str) -> Result<DataKey, SealError> {
        use base64::Engine;
        let text = text.trim();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(text))
            .map_err(|_| SealError::BadKey)?;
        if bytes.len() != 32 {
            return Err(SealError::BadKey);
        }
        Ok(DataKey(bytes))
    }

    fn key(&self) -> Result<LessSafeKey, SealError> {
        UnboundKey::new(&CHACHA20_POLY1305, &self.0)
            .map(LessSafeKey::new)
            .map_err(|_| SealError::BadKey)
    }

    /// `nonce ‖ ciphertext ‖ tag`, with a fresh random nonce, bound to `place` (the row
    /// it is kept in, `event:<id>`): it opens only with the same `place`
    /// ([`DataKey::open_at`]), so a sealed value moved to another row by someone who can
    /// write the database does not open there.
    pub fn seal_at(&self, place: &str, plaintext: &[u8]) -> Result<Vec<u8>, SealError> {
        self.seal_with(plaintext, place.as_bytes())
    }

    /// The plaintext of [`DataKey::seal_at`]'s output at `place`, and only there.
    pub fn open_at(&self, place: &str, sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        self.open_with(sealed, place.as_bytes())
    }

    /// The plaintext of a value sealed before values were bound to their place (before
    /// 2026-11-27), which opens wherever it is kept. Only for `steward reseal`, which
    /// binds such values (`server::reseal`), and for `serve`'s start-up count of them
    /// (which drops the plaintext); nothing else opens them.
    pub fn open_unbound(&self, sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        self.open_with(sealed, &[])
    }

    fn seal_with(&self, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| SealError::Random)?;
        let mut data = plaintext.to_vec();
        self.key()?
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                ring::aead::Aad::from(aad),
                &mut data,
            )
            .map_err(|_| SealError::Random)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(out)
    }

    fn open_with(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, SealError> {
        if sealed.len() < NONCE_LEN {
            return Err(SealError::Open);
        }
        let (nonce, body) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Open)?;
        let mut data = body.to_vec();
        let plain = self
            .key()?
            .open_in_place(nonce, ring::aead::Aad::from(aad), &mut data)
            .map_err(|_| SealError::Open)?;
        Ok(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_and_opens_and_refuses_tampering() {
        let key = DataKey::parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").unwrap();
        let sealed = key.seal_at("event:1", b"rotate the prod key").unwrap();
        assert!(!sealed.windows(6).any(|w| w == b"rotate"));
        assert_eq!(key.open_at("event:1", &sealed).unwrap(), b"rotate the prod key");
        let mut bad = sealed.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(key.open_at("event:1", &bad), Err(SealError::Open));
        let other = DataKey::parse("AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=").unwrap();
        assert_eq!(other.open_at("event:1", &sealed), Err(SealError::Open));
        assert_eq!(DataKey::parse("c2hvcnQ=").unwrap_err(), SealError::BadKey);
        assert!(!format!("{key:?}").contains("AAEC"));
    }

    #[test]
    fn a_value_bound_to_its_row_opens_only_there() {
        let key = DataKey::parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").unwrap();
        let sealed = key.seal_at("event:1", b"merger plans").unwrap();
        assert_eq!(key.open_at("event:1", &sealed).unwrap(), b"merger plans");
        assert_eq!(key.open_at("event:2", &sealed), Err(SealError::Open));
        assert_eq!(key.open_unbound(&sealed), Err(SealError::Open));
        // Sealed before values were bound: opens only as such, never at a place.
        let old = key.seal_with(b"older", &[]).unwrap();
        assert_eq!(key.open_at("event:1", &old), Err(SealError::Open));
        assert_eq!(key.open_unbound(&old).unwrap(), b"older");
    }
}
