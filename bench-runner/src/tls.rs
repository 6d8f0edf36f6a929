//! TLS for every client path: one rustls `ClientConfig` per target (ring only: the workspace
//! links one crypto provider), trusting the target's CA or else the public web roots (the
//! runner image has no system store), presenting a client certificate when given one, and
//! verifying the server's name, or `server_name` instead. Its verifier names the certificate
//! it refused (subject, names, issuer, validity), so a run that fails `TargetTLSFailed` says
//! what the server presented, on the hand-written clients and inside async-nats' and rumqttc's
//! errors alike.
use crate::refusal::TargetRefused;
use runner_api::target::TargetUrl;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, OtherError, RootCertStore,
    SignatureScheme,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::client::TlsStream;

/// A target's TLS files and name, as the flags and the agent config give them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TlsFiles {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub server_name: Option<String>,
}

impl TlsFiles {
    pub fn apply(&self, t: &mut TargetUrl) {
        t.ca_file = self.ca_file.clone();
        t.cert_file = self.cert_file.clone();
        t.key_file = self.key_file.clone();
        t.server_name = self.server_name.clone();
    }
}

impl From<&runner_api::agent::TargetTls> for TlsFiles {
    fn from(t: &runner_api::agent::TargetTls) -> Self {
        TlsFiles {
            ca_file: t.ca_file.as_ref().map(PathBuf::from),
            cert_file: t.cert_file.as_ref().map(PathBuf::from),
            key_file: t.key_file.as_ref().map(PathBuf::from),
            server_name: t.server_name.clone(),
        }
    }
}

/// A server that takes a TCP connection but never answers a ClientHello is not a TLS server.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How one target's TLS is set up; built once per driver, shared by its connections.
pub struct TlsClient {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    url: String,
}

impl TlsClient {
    /// The target's TLS: its `ca_file` (else the public roots), its client certificate
    /// (`cert_file` and `key_file`, both or neither) and the name to verify. Unusable files
    /// are a [`TargetRefused`] (`TargetTLSFailed`) naming the file, never quoting a key.
    pub fn for_target(t: &TargetUrl) -> anyhow::Result<Arc<TlsClient>> {
        let refused = |detail: String| TargetRefused::tls(&t.raw, detail);
        let (roots, trusted) = match &t.ca_file {
            Some(ca) => (
                ca_roots(ca).map_err(refused)?,
                format!("the CA in {}", ca.display()),
            ),
            None => (
                RootCertStore {
                    roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
                },
                "the public web roots (no CA given)".to_string(),
            ),
        };
        let name = ServerName::try_from(t.tls_name().to_string()).map_err(|_| {
            refused(format!(
                "{:?} is not a host name or IP address to verify",
                t.tls_name()
            ))
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| refused(format!("no usable trust anchor: {e}")))?;
        let verifier = Arc::new(NamingVerifier {
            inner,
            name: t.server_name.as_ref().map(|_| name.clone()),
            trusted,
        });
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| refused(format!("TLS versions: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match (&t.cert_file, &t.key_file) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let (chain, key) = client_identity(cert, key).map_err(refused)?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| refused(format!("client certificate {}: {e}", cert.display())))?
            }
            _ => {
                return Err(refused(
                    "a client certificate needs both its certificate and its key file".into(),
                )
                .into())
            }
        };
        Ok(Arc::new(TlsClient {
            config: Arc::new(config),
            name,
            url: t.raw.clone(),
        }))
    }

    /// The config, for clients that do their own handshake (async-nats, rumqttc).
    pub fn config(&self) -> Arc<ClientConfig> {
        self.config.clone()
    }

    /// The TLS handshake over `io`, bounded in time. Every failure is a [`TargetRefused`]:
    /// the TCP connection stood, so the server is there and does not take this TLS.
    pub async fn connect<S>(&self, io: S) -> anyhow::Result<TlsStream<S>>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let c = tokio_rustls::TlsConnector::from(self.config.clone());
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, c.connect(self.name.clone(), io)).await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(TargetRefused::tls(&self.url, handshake_failure(&e)).into()),
            Err(_) => Err(TargetRefused::tls(
                &self.url,
                format!(
                    "no answer to the TLS handshake within {} s: does the server speak TLS on \
                     this port?",
                    HANDSHAKE_TIMEOUT.as_secs()
                ),
            )
            .into()),
        }
    }
}

/// The target's TLS when its scheme says TLS, else `None`.
pub fn for_tls_target(t: &TargetUrl) -> anyhow::Result<Option<Arc<TlsClient>>> {
    t.is_tls().then(|| TlsClient::for_target(t)).transpose()
}

fn ca_roots(path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read the CA file {}: {e}", path.display()))?;
    for cert in certs {
        let cert = cert.map_err(|e| format!("the CA file {}: {e}", path.display()))?;
        roots
            .add(cert)
            .map_err(|e| format!("the CA file {}: {e}", path.display()))?;
    }
    if roots.is_empty() {
        return Err(format!(
            "the CA file {} holds no PEM certificate",
            path.display()
        ));
    }
    Ok(roots)
}

type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn client_identity(cert: &Path, key: &Path) -> Result<Identity, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("the client certificate file {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "the client certificate file {} holds no PEM certificate",
            cert.display()
        ));
    }
    // The parser's error could quote the file: say only which file it was.
    let key = PrivateKeyDer::from_pem_file(key).map_err(|_| {
        format!(
            "the key file {} holds no usable PEM private key",
            key.display()
        )
    })?;
    Ok((chain, key))
}

/// Verifies as webpki does, against `name` when one was given instead of the host; a refusal
/// carries what the server presented.
#[derive(Debug)]
struct NamingVerifier {
    inner: Arc<WebPkiServerVerifier>,
    name: Option<ServerName<'static>>,
    /// Which roots were trusted, for the message.
    trusted: String,
}

impl ServerCertVerifier for NamingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let name: &ServerName<'_> = self.name.as_ref().unwrap_or(server_name);
        self.inner
            .verify_server_cert(end_entity, intermediates, name, ocsp, now)
            .map_err(|e| {
                let why = match &e {
                    rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
                        "UnknownIssuer (not signed by a CA this runner trusts)".into()
                    }
                    rustls::Error::InvalidCertificate(c) => c.to_string(),
                    other => other.to_string(),
                };
                let seen = CertRefused(format!(
                    "{why}; the server presented {}; verified as {:?} against {}",
                    describe(end_entity),
                    name.to_str(),
                    self.trusted
                ));
                rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                    seen,
                ))))
            })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Why a certificate was refused, and what it was (the text inside rustls' error).
#[derive(Debug)]
struct CertRefused(String);

impl std::fmt::Display for CertRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CertRefused {}

/// `subject "CN=…", names [a, b], issuer "CN=…", valid … to …` of a DER certificate.
pub fn describe(der: &[u8]) -> String {
    use x509_parser::extensions::GeneralName;
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return "a certificate that does not parse as X.509".into();
    };
    let names: Vec<String> = match cert.subject_alternative_name() {
        Ok(Some(san)) => (san.value.general_names.iter())
            .map(|n| match n {
                GeneralName::DNSName(d) => d.to_string(),
                GeneralName::IPAddress(ip) => ip_text(ip),
                other => other.to_string(),
            })
            .collect(),
        _ => Vec::new(),
    };
    let v = cert.validity();
    format!(
        "subject {:?}, names [{}], issuer {:?}, valid {} to {}",
        cert.subject().to_string(),
        names.join(", "),
        cert.issuer().to_string(),
        v.not_before,
        v.not_after
    )
}

fn ip_text(b: &[u8]) -> String {
    match b.len() {
        4 => std::net::Ipv4Addr::from(<[u8; 4]>::try_from(b).expect("4 bytes")).to_string(),
        16 => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(b).expect("16 bytes")).to_string(),
        _ => format!("{b:02x?}"),
    }
}

/// What a failed handshake (or a TLS error on the first reads after it) means, in words.
pub fn handshake_failure(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        return tls_failure(tls);
    }
    match e.kind() {
        K::UnexpectedEof | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => format!(
            "the server closed the connection during the TLS handshake ({e}): it may not speak \
             TLS on this port, or it refused this client"
        ),
        _ => format!("TLS handshake: {e}"),
    }
}

fn tls_failure(e: &rustls::Error) -> String {
    use rustls::Error as E;
    match e {
        // The verifier's own words (what the server presented), not rustls' Debug of them.
        E::InvalidCertificate(CertificateError::Other(seen)) => {
            format!("the server's certificate was refused: {}", seen.0)
        }
        E::InvalidCertificate(c) => format!("the server's certificate was refused: {c}"),
        E::InvalidMessage(_) | E::InappropriateMessage { .. } => {
            format!("the server did not answer in TLS ({e}): is this port TLS at all?")
        }
        E::AlertReceived(alert) => format!(
            "the server ended the handshake with alert {alert:?}: it did not accept this \
             client (a client certificate missing, or signed by a CA it does not trust?)"
        ),
        other => format!("TLS handshake: {other}"),
    }
}

/// A TLS failure inside `e` (a rustls error in an I/O error of its chain), in words: for
/// failures that show only on the first reads after the handshake (TLS 1.3 servers check the
/// client certificate after the client's last handshake message).
pub fn failure_in(e: &anyhow::Error) -> Option<String> {
    e.chain().find_map(rustls_failure)
}

/// The same for a client library's error (its `source()` chain).
pub fn failure_in_error(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    std::iter::successors(Some(e), |c| c.source()).find_map(rustls_failure)
}

fn rustls_failure(c: &(dyn std::error::Error + 'static)) -> Option<String> {
    let tls = match c.downcast_ref::<std::io::Error>() {
        Some(io) => io.get_ref()?.downcast_ref::<rustls::Error>(),
        None => c.downcast_ref::<rustls::Error>(),
    };
    tls.map(tls_failure)
}

/// Whether a client library's error text is a failed TLS handshake (async-nats flattens
/// rustls' error into its own).
pub fn is_failure_text(text: &str) -> bool {
    const MARKERS: &[&str] = &[
        "invalid peer certificate",
        "received fatal alert",
        "received corrupt message",
        "received unexpected message",
        "received unexpected handshake message",
        "tls handshake eof",
        "peer is incompatible",
        "peer misbehaved",
    ];
    let low = text.to_ascii_lowercase();
    MARKERS.iter().any(|m| low.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refusal::{refusal_of, Refusal};

    fn target(files: &TlsFiles) -> TargetUrl {
        let mut t = TargetUrl::parse("mqtts://127.0.0.1").unwrap();
        files.apply(&mut t);
        t
    }

    fn refused(files: &TlsFiles) -> String {
        let e = TlsClient::for_target(&target(files))
            .err()
            .expect("refused");
        let r = refusal_of(&e).expect("a refusal");
        assert_eq!(r.refusal, Refusal::Tls);
        format!("{e:#}")
    }

    /// Unusable TLS files are TargetTLSFailed naming the file, never quoting a key.
    #[test]
    fn unusable_files_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.crt");
        let e = refused(&TlsFiles {
            ca_file: Some(missing.clone()),
            ..Default::default()
        });
        assert!(e.contains(&missing.display().to_string()), "{e}");
        let half = TlsFiles {
            cert_file: Some(missing),
            ..Default::default()
        };
        assert!(refused(&half).contains("both"));
        let cert = rcgen::generate_simple_self_signed(vec!["a.test".into()]).unwrap();
        let (c, k) = (dir.path().join("c.crt"), dir.path().join("k.key"));
        std::fs::write(&c, cert.cert.pem()).unwrap();
        std::fs::write(
            &k,
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA\n",
        )
        .unwrap();
        let bad_key = TlsFiles {
            cert_file: Some(c),
            key_file: Some(k),
            ..Default::default()
        };
        let e = refused(&bad_key);
        assert!(e.contains("k.key") && !e.contains("c2VjcmV0"), "{e}");
        // Without a CA: the public roots, and a config comes out.
        assert!(TlsClient::for_target(&target(&TlsFiles::default())).is_ok());
    }

    #[test]
    fn a_certificate_is_described_by_its_names() {
        let cert =
            rcgen::generate_simple_self_signed(vec!["a.test".into(), "10.0.0.1".into()]).unwrap();
        let d = describe(cert.cert.der());
        assert!(d.contains("names [a.test, 10.0.0.1]"), "{d}");
        assert!(d.contains("issuer \"CN=rcgen self signed cert\""), "{d}");
        assert_eq!(
            describe(b"junk"),
            "a certificate that does not parse as X.509"
        );
        assert!(is_failure_text(
            "IO error: received fatal alert: BadCertificate"
        ));
        assert!(!is_failure_text("IO error: Connection refused"));
    }
}
