//! What every egress proxy of the process shares: the internal addresses the operator
//! opened, where secret values are read, and (built the first time a run needs it) the
//! process's certificate authority and the client that forwards opened requests.
//!
//! The CA's key is generated in memory and never written anywhere; its certificate is
//! the only part a sandboxed program sees (in the trust bundle the sandbox mounts).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::http::EgressPolicy;

/// Reads a secret's value by steward's variable name.
type SecretSource = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Names resolved to fixed addresses (tests), still checked like DNS answers.
#[derive(Debug, Default)]
struct Resolver {
    internal: EgressPolicy,
    fixed: HashMap<String, IpAddr>,
}

impl Resolver {
    async fn addrs(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        if let Some(ip) = self.fixed.get(&host.trim_end_matches('.').to_ascii_lowercase()) {
            return Ok(vec![SocketAddr::new(*ip, port)]);
        }
        Ok(tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .collect())
    }

    /// The addresses of `host` the policy allows; the reason when none is.
    async fn checked(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let found = self.addrs(host, port).await?;
        match self.internal.allowed_addrs(host, found) {
            Ok(allowed) if allowed.is_empty() => Err(format!("{host} has no address")),
            Ok(allowed) => Ok(allowed),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// The forwarding client's resolver: the same checks, so the address that was checked
/// is the one dialled.
struct CheckedDns(Arc<Resolver>);

impl reqwest::dns::Resolve for CheckedDns {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let resolver = self.0.clone();
        Box::pin(async move {
            match resolver.checked(name.as_str(), 0).await {
                Ok(addrs) => Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs),
                Err(why) => Err(why.into()),
            }
        })
    }
}

/// The process's side of every egress proxy.
pub struct EgressHub {
    resolver: Arc<Resolver>,
    secrets: SecretSource,
    /// More roots (PEM) trusted upstream and by sandboxed programs.
    extra_roots: String,
    /// The host's CA bundle, when not the system's (`SSL_CERT_FILE`).
    host_bundle: Option<std::path::PathBuf>,
    tls: OnceLock<Result<Arc<Interceptor>, String>>,
}

impl std::fmt::Debug for EgressHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressHub")
            .field("internal", &self.resolver.internal)
            .finish_non_exhaustive()
    }
}

impl Default for EgressHub {
    /// Every internal address refused, no secret values.
    fn default() -> Self {
        EgressHub::new(EgressPolicy::default())
    }
}

impl EgressHub {
    /// Proxies that reach the internal addresses `internal` opens (`STEWARD_HTTP_ALLOW`),
    /// with no secret values until [`EgressHub::with_secrets`].
    pub fn new(internal: EgressPolicy) -> EgressHub {
        EgressHub {
            resolver: Arc::new(Resolver {
                internal,
                fixed: HashMap::new(),
            }),
            secrets: Arc::new(|_| None),
            extra_roots: String::new(),
            host_bundle: None,
            tls: OnceLock::new(),
        }
    }

    /// Secret values are read with `var` (steward's environment), when a run starts.
    pub fn with_secrets(mut self, var: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> EgressHub {
        self.secrets = Arc::new(var);
        self
    }

    /// `host` resolves to `ip` (for tests: fake servers on 127.0.0.1 under real names);
    /// the address is still checked against the policy.
    pub fn with_host(mut self, host: &str, ip: IpAddr) -> EgressHub {
        let mut resolver = Resolver {
            internal: self.resolver.internal.clone(),
            fixed: self.resolver.fixed.clone(),
        };
        resolver.fixed.insert(host.to_ascii_lowercase(), ip);
        self.resolver = Arc::new(resolver);
        self
    }

    /// Also trusts the CA certificates in `pem`, upstream and in sandboxed programs (an
    /// on-premises CA; a test's).
    pub fn with_extra_roots(mut self, pem: &str) -> Result<EgressHub, String> {
        let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|e| e.to_string())?;
        if certs.is_empty() {
            return Err("no certificate in the PEM text".into());
        }
        self.extra_roots.push_str(pem.trim_end());
        self.extra_roots.push('\n');
        Ok(self)
    }

    /// Sandboxes trust the CA bundle at `path` (the operator's `SSL_CERT_FILE`) rather
    /// than the system's, plus the process's CA.
    pub fn with_host_bundle(mut self, path: Option<std::path::PathBuf>) -> EgressHub {
        self.host_bundle = path;
        self
    }

    /// The internal addresses opened.
    pub fn policy(&self) -> &EgressPolicy {
        &self.resolver.internal
    }

    /// The first address of `host` the policy allows.
    pub(super) async fn resolve(&self, host: &str, port: u16) -> Result<SocketAddr, String> {
        Ok(self.resolver.checked(host, port).await?[0])
    }

    pub(super) fn var(&self, name: &str) -> Option<String> {
        (self.secrets)(name)
    }

    /// The CA and forwarding client, made on first use.
    pub(super) fn interceptor(&self) -> Result<Arc<Interceptor>, String> {
        self.tls
            .get_or_init(|| {
                Interceptor::new(
                    self.resolver.clone(),
                    &self.extra_roots,
                    self.host_bundle.as_deref(),
                )
                .map(Arc::new)
            })
            .clone()
    }
}

/// Most certificates kept: a `*.domain` secret host allows any number of names, and a
/// program must not grow the cache without bound (past it, the cache starts over).
const MAX_LEAVES: usize = 256;

/// Most time a forwarded request may take, headers to the end of its body.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(120);

/// Where a host's trust bundle usually is: Debian's, else Red Hat's.
const SYSTEM_BUNDLES: [&str; 2] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
];

/// The process's CA, the certificates it made, and the forwarding client.
pub(super) struct Interceptor {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca: rustls::pki_types::CertificateDer<'static>,
    /// What sandboxed programs trust: the host's bundle, the extra roots and this CA.
    pub bundle: Arc<String>,
    leaves: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
    pub client: reqwest::Client,
}

impl Interceptor {
    fn new(
        resolver: Arc<Resolver>,
        extra_roots: &str,
        host_bundle: Option<&std::path::Path>,
    ) -> Result<Interceptor, String> {
        crate::http::install_crypto_provider();
        let failed = |e: rcgen::Error| format!("cannot make the egress CA: {e}");
        let key = rcgen::KeyPair::generate().map_err(failed)?;
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name.push(
            rcgen::DnType::CommonName,
            "steward egress proxy (this process only)",
        );
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).map_err(failed)?;
        let host_bundle = host_bundle
            .into_iter()
            .chain(SYSTEM_BUNDLES.iter().map(std::path::Path::new))
            .find_map(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        let bundle = format!("{}\n{extra_roots}{}", host_bundle.trim_end(), cert.pem());
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("steward/", env!("CARGO_PKG_VERSION")))
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(FORWARD_TIMEOUT)
            .dns_resolver(Arc::new(CheckedDns(resolver)));
        if !extra_roots.is_empty() {
            let roots =
                reqwest::Certificate::from_pem_bundle(extra_roots.as_bytes()).map_err(|e| e.to_string())?;
            builder = builder.tls_certs_merge(roots);
        }
        let client = builder
            .build()
            .map_err(|e| format!("cannot build the forwarding client: {e}"))?;
        Ok(Interceptor {
            issuer: rcgen::Issuer::new(params, key),
            ca: cert.der().clone(),
            bundle: Arc::new(bundle),
            leaves: Mutex::new(HashMap::new()),
            client,
        })
    }

    /// The TLS settings presenting a certificate for `host`, signed by this CA (made
    /// once per host).
    pub fn server_config(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, String> {
        let host = host.to_ascii_lowercase();
        if let Some(found) = self.leaves.lock().unwrap_or_else(|e| e.into_inner()).get(&host) {
            return Ok(found.clone());
        }
        let failed = |e: rcgen::Error| format!("cannot make a certificate for {host}: {e}");
        let key = rcgen::KeyPair::generate().map_err(failed)?;
        let mut params = rcgen::CertificateParams::new(vec![host.clone()]).map_err(failed)?;
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer).map_err(failed)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone(), self.ca.clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .map_err(|e| e.to_string())?;
        // Requests are read one at a time over HTTP/1.1.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        let mut leaves = self.leaves.lock().unwrap_or_else(|e| e.into_inner());
        if leaves.len() >= MAX_LEAVES {
            leaves.clear();
        }
        leaves.insert(host, config.clone());
        Ok(config)
    }
}
