//! Where a provider lives and its key.

/// Where a provider lives and how to authenticate.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub base_url: String,
    /// Optional so keyless local servers (Ollama, vLLM) work.
    pub api_key: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    // Never print the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}
