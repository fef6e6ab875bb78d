//! TLS for `https://` servers (ORS servers and model servers alike): rustls on the ring
//! provider, trusting Mozilla's roots (`webpki-roots`, the same on every machine) or the
//! system's store, plus any CA certificates given in a PEM file for self-signed deployments.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

use crate::config::{TlsRoots, CA_CERT_ENV};
use crate::error::{Error, Result};

/// The rustls configuration for `roots` plus the CA certificates in `ca_file`.
pub(crate) fn client_config(roots: TlsRoots, ca_file: Option<&Path>) -> Result<ClientConfig> {
    let mut store = RootCertStore::empty();
    match roots {
        TlsRoots::Mozilla => store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        TlsRoots::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found
                    .errors
                    .first()
                    .map_or_else(|| "none found".to_owned(), ToString::to_string);
                return Err(Error::InvalidArgument(format!(
                    "the system's root certificates cannot be used ({why}); use the built-in \
                     Mozilla roots or give a CA file"
                )));
            }
        }
    }
    if let Some(path) = ca_file {
        for cert in read_pem(path)? {
            store.add(cert).map_err(|e| {
                Error::InvalidArgument(format!(
                    "CA file {}: a certificate cannot be used as a root: {e}",
                    path.display()
                ))
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // ALPN (http/1.1) is set by the connector.
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::InvalidArgument(format!("TLS set-up: {e}")))?
        .with_root_certificates(store)
        .with_no_client_auth())
}

/// The certificates of a PEM file (at least one).
fn read_pem(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let bad =
        |e: &dyn fmt::Display| Error::InvalidArgument(format!("CA file {}: {e}", path.display()));
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(&e))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad(&e))?;
    if certs.is_empty() {
        return Err(bad(
            &"no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
        ));
    }
    Ok(certs)
}

/// A certificate problem in words.
pub(crate) fn certificate_problem(e: &rustls::CertificateError) -> &'static str {
    use rustls::CertificateError as C;
    match e {
        C::UnknownIssuer | C::BadSignature => {
            "its certificate is not signed by a CA the client trusts"
        }
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            "its certificate is for another host name"
        }
        C::Expired | C::ExpiredContext { .. } => "its certificate has expired",
        C::NotValidYet | C::NotValidYetContext { .. } => "its certificate is not valid yet",
        C::Revoked => "its certificate was revoked",
        _ => "its certificate was refused",
    }
}

/// What the client trusts, for error messages.
pub(crate) fn trust_note(roots: TlsRoots, ca_file: Option<&PathBuf>) -> String {
    let roots = match roots {
        TlsRoots::Mozilla => "Mozilla's roots",
        TlsRoots::System => "the system's roots",
    };
    match ca_file {
        Some(f) => format!("{roots} and {}", f.display()),
        None => format!(
            "{roots}; for a private or self-signed CA give its certificate with --ca-cert FILE, \
             {CA_CERT_ENV} or ClientBuilder::ca_cert"
        ),
    }
}

/// The rustls error in `err`'s chain, if the failure was the TLS handshake. The connector
/// wraps it in `io::Error`s, whose `source()` skips the wrapped error itself, so those are
/// opened with `get_ref`.
pub(crate) fn tls_cause<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    std::iter::successors(Some(err), |&e| e.source()).find_map(|e| {
        let wrapped = e.downcast_ref::<io::Error>().and_then(io::Error::get_ref);
        e.downcast_ref::<rustls::Error>()
            .or_else(|| wrapped.and_then(|inner| tls_cause(inner)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_parse_by_name() {
        assert_eq!("system".parse(), Ok(TlsRoots::System));
        assert_eq!(" Mozilla ".parse(), Ok(TlsRoots::Mozilla));
        assert!("both".parse::<TlsRoots>().is_err());
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("ors-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = client_config(TlsRoots::Mozilla, Some(&empty))
            .unwrap_err()
            .to_string();
        assert!(err.contains("empty.pem") && err.contains("no PEM"), "{err}");
        let missing = dir.join("missing.pem");
        let err = client_config(TlsRoots::Mozilla, Some(&missing))
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing.pem"), "{err}");
        assert!(client_config(TlsRoots::Mozilla, None).is_ok());
    }

    #[test]
    fn the_tls_cause_is_found_through_io_errors() {
        let inner = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let outer = std::io::Error::other(inner);
        assert!(matches!(
            tls_cause(&outer),
            Some(rustls::Error::InvalidCertificate(_))
        ));
        assert!(tls_cause(&std::io::Error::other("plain")).is_none());
    }
}
