//! Throwaway certificate authorities for the TLS tests (rcgen): a CA, server certificates it
//! signs for the names given, client certificates, an expired one. Files are PEM, as a
//! Secret's `ca.crt`, `tls.crt` and `tls.key` are mounted.
use rcgen::{
    date_time_ymd, BasicConstraints, Certificate, CertificateParams, DnType, IsCa, KeyPair,
};
use std::path::{Path, PathBuf};

pub struct Ca {
    cert: Certificate,
    key: KeyPair,
    /// Its certificate, PEM.
    pub file: PathBuf,
}

/// A certificate and its key, as files.
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Ca {
    /// A CA whose subject is `CN=<name>`, written to `<dir>/<name>.crt`.
    pub fn new(dir: &Path, name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        let file = dir.join(format!("{name}.crt"));
        std::fs::write(&file, cert.pem()).unwrap();
        Ca { cert, key, file }
    }

    /// A certificate for `names` (DNS names or IP addresses), subject `CN=<cn>`, written to
    /// `<dir>/<cn>.crt` and `.key`.
    pub fn issue(&self, dir: &Path, cn: &str, names: &[&str]) -> Issued {
        self.issue_with(dir, cn, names, |_| {})
    }

    /// The same, already expired (valid in 2020 only).
    pub fn issue_expired(&self, dir: &Path, cn: &str, names: &[&str]) -> Issued {
        self.issue_with(dir, cn, names, |p| {
            p.not_before = date_time_ymd(2020, 1, 1);
            p.not_after = date_time_ymd(2020, 12, 31);
        })
    }

    fn issue_with(
        &self,
        dir: &Path,
        cn: &str,
        names: &[&str],
        edit: impl FnOnce(&mut CertificateParams),
    ) -> Issued {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        edit(&mut p);
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        let files = Issued {
            cert: dir.join(format!("{cn}.crt")),
            key: dir.join(format!("{cn}.key")),
        };
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        files
    }
}

/// A rustls server config presenting `server` (for in-test TLS servers).
pub fn server_config(server: &Issued) -> std::sync::Arc<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&server.cert)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(&server.key).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    std::sync::Arc::new(config)
}
