//! The client over https: a TLS-terminating front (tokio-rustls, with a CA and a certificate
//! made in the test by rcgen) before the in-process server, and optionally before the
//! sabotaging proxy, so discovery, a chunked result and a reconnect by `task_id` all travel
//! over TLS.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ors_client::{Client, Error};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::support::{a_cut_call_runs_once, server, text, Proxy};

/// A CA and a server certificate for `localhost` and 127.0.0.1 that it signed.
struct Pki {
    /// The CA certificate, PEM, in a file of its own.
    ca_file: PathBuf,
    acceptor: TlsAcceptor,
}

fn ring() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Pki {
    fn new(tag: &str) -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, format!("ors test CA {tag}"));
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();

        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();

        let dir = std::env::temp_dir().join(format!("ors-client-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_file = dir.join(format!("{tag}-ca.pem"));
        std::fs::write(&ca_file, ca.pem()).unwrap();

        let chain = vec![cert.der().clone(), ca.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let config = rustls::ServerConfig::builder_with_provider(ring())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        Pki {
            ca_file,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        }
    }
}

/// Terminates TLS and forwards the plain bytes to an `http://` upstream.
struct TlsFront {
    /// `https://localhost:PORT`.
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl TlsFront {
    async fn start(upstream: &str, acceptor: TlsAcceptor) -> TlsFront {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
                tokio::spawn(async move {
                    // A client that rejects the certificate ends the handshake: nothing to serve.
                    let Ok(mut tls) = acceptor.accept(conn).await else {
                        return;
                    };
                    if let Ok(mut plain) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                    }
                });
            }
        });
        TlsFront {
            url: format!("https://localhost:{port}"),
            task,
        }
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn https_client(url: &str, ca_file: &PathBuf) -> Client {
    Client::builder(url)
        .no_api_key()
        .ca_cert(ca_file)
        .backoff(Duration::from_millis(20), Duration::from_millis(100))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_and_an_episode_with_a_chunked_result_over_https() {
    let srv = server().await;
    let pki = Pki::new("episode");
    let front = TlsFront::start(&srv.url(), pki.acceptor.clone()).await;
    let c = https_client(&front.url, &pki.ca_file);

    assert!(c
        .environments()
        .await
        .unwrap()
        .contains(&"conformance".to_owned()));
    let env = c.environment("conformance");
    assert_eq!(env.num_tasks("train").await.unwrap(), 25);
    assert!(env
        .tools()
        .await
        .unwrap()
        .iter()
        .any(|t| t.name == "submit"));

    let s = env.session_at("train", 3).await.unwrap();
    assert_eq!(text(&s.prompt().await.unwrap()), "What is 3+3?");
    // Larger than one SSE chunk, so the result arrives as chunk events and an end.
    let n = ors_core::sse::CHUNK_SIZE * 3 + 17;
    let big = s.call("big", json!({ "bytes": n })).await.unwrap();
    assert_eq!(text(&big.blocks).len(), n);
    let out = s.call("submit", json!({"answer": "6"})).await.unwrap();
    assert_eq!((out.reward, out.finished), (Some(1.0), true));
    s.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_over_https_reconnects_by_task_id_and_runs_once() {
    let srv = server().await;
    let proxy = Proxy::start(&srv.url()).await;
    let pki = Pki::new("reconnect");
    let front = TlsFront::start(&proxy.url, pki.acceptor.clone()).await;
    let c = https_client(&front.url, &pki.ca_file);
    let s = c
        .environment("conformance")
        .session_at("train", 0)
        .await
        .unwrap();

    a_cut_call_runs_once(&s, &proxy).await;
    s.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_a_tls_error_naming_the_host() {
    let srv = server().await;
    let pki = Pki::new("trusted");
    let other = Pki::new("other");
    let front = TlsFront::start(&srv.url(), pki.acceptor.clone()).await;
    let host = front.url.trim_start_matches("https://").to_owned();

    // Another CA's certificate, and no CA file at all (Mozilla's roots only).
    let wrong_ca = https_client(&front.url, &other.ca_file);
    let no_ca = Client::builder(&front.url).no_api_key().build().unwrap();
    for (c, trusts) in [(wrong_ca, "other-ca.pem"), (no_ca, "--ca-cert")] {
        match c.environments().await {
            Err(Error::Tls { host: h, detail }) => {
                assert_eq!(h, host);
                assert!(detail.contains("not signed by a CA"), "{detail}");
                assert!(detail.contains(trusts), "{detail}");
                let shown = Error::Tls { host: h, detail }.to_string();
                assert!(shown.contains(&host), "{shown}");
            }
            other => panic!("expected a TLS error, got {other:?}"),
        }
    }
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_to_a_plain_http_port_says_so() {
    let srv = server().await;
    let url = srv.url();
    let port = url.rsplit(':').next().unwrap().trim_end_matches('/');
    let pki = Pki::new("plain");
    let c = https_client(&format!("https://localhost:{port}"), &pki.ca_file);
    match c.environments().await {
        Err(Error::Tls { host, detail }) => {
            assert_eq!(host, format!("localhost:{port}"));
            assert!(detail.contains("speak https"), "{detail}");
        }
        other => panic!("expected a TLS error, got {other:?}"),
    }
    srv.shutdown().await;
}
