//! Throwaway certificate authorities for servers with TLS: a CA, and certificates it signs for
//! a server's names or for a client.
use anyhow::Result;
use rcgen::{BasicConstraints, Certificate, CertificateParams, DnType, IsCa, KeyPair};

/// A CA that signs certificates for one test.
pub struct TestCa {
    cert: Certificate,
    key: KeyPair,
    /// Its certificate, PEM: what clients verify servers with.
    pub pem: String,
}

/// A certificate and its key, PEM.
pub struct Issued {
    pub cert: String,
    pub key: String,
}

impl TestCa {
    /// A CA whose certificate names it `name` (a TLS failure shows the issuer).
    pub fn new(name: &str) -> Result<TestCa> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(TestCa {
            pem: cert.pem(),
            cert,
            key,
        })
    }

    /// A certificate for `names` (DNS names or IP addresses), for a server or a client.
    pub fn issue(&self, names: &[String]) -> Result<Issued> {
        let key = KeyPair::generate()?;
        let cert =
            CertificateParams::new(names.to_vec())?.signed_by(&key, &self.cert, &self.key)?;
        Ok(Issued {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

/// A Service's names in the cluster: `<svc>.<ns>.svc` and `<svc>.<ns>.svc.cluster.local`.
pub fn service_names(svc: &str, ns: &str) -> Vec<String> {
    vec![
        format!("{svc}.{ns}.svc"),
        format!("{svc}.{ns}.svc.cluster.local"),
    ]
}
