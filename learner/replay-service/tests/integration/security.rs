//! The learner's security options on the replay service: a shared token on
//! every call, and TLS with a CA the client trusts.
use crate::support;

use seed_replay_service::client::ClientOptions;
use seed_replay_service::server::ServerTls;
use seed_replay_service::{ReplayClient, ServerOptions};
use support::*;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_needs_the_token() {
    let options = ServerOptions {
        token: seed_shared::Token::new("s3cret"),
        ..ServerOptions::default()
    };
    let cfg = config(&[table_json("u", 8, r#""sampler": {"kind": "uniform"}"#)]);
    let server = seed_replay_service::start(cfg, options).await.unwrap();
    let connect = |token: Option<&str>| {
        let url = server.url(false);
        let options = ClientOptions {
            token: token.and_then(seed_shared::Token::new),
            ..ClientOptions::default()
        };
        async move { ReplayClient::connect(&url, options).await.unwrap() }
    };
    let mut none = connect(None).await;
    let e = none.info(None).await.unwrap_err();
    assert_eq!(e.code(), Some(Code::Unauthenticated));
    assert!(e.to_string().contains("authorization"), "{e}");
    let e = none.insert("u", items(1, 0, 1)).await.unwrap_err();
    assert_eq!(e.code(), Some(Code::Unauthenticated));
    let mut wrong = connect(Some("s3cres")).await;
    assert_eq!(
        wrong.sample("u", 1).await.unwrap_err().code(),
        Some(Code::Unauthenticated)
    );
    let mut right = connect(Some("s3cret")).await;
    right.insert("u", items(1, 0, 2)).await.unwrap();
    verify(&right.sample("u", 2).await.unwrap());
    assert_eq!(right.info(None).await.unwrap()[0].inserted, 2);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_a_client_that_trusts_the_ca() {
    let files = seed_test_pki::SelfSignedFiles::generate();
    let (cert_path, key_path) = (&files.cert, &files.key);
    let tls = ServerTls::from_files(cert_path, key_path, None).unwrap();
    let options = ServerOptions {
        tls: Some(tls),
        ..ServerOptions::default()
    };
    let cfg = config(&[table_json("u", 8, r#""sampler": {"kind": "uniform"}"#)]);
    let server = seed_replay_service::start(cfg, options).await.unwrap();
    let ca = seed_shared::tls::read_certificates("--tls-ca", cert_path).unwrap();
    let options = ClientOptions {
        tls_ca: Some(ca),
        tls_domain: Some("localhost".into()),
        ..ClientOptions::default()
    };
    let mut c = ReplayClient::connect(&server.url(true), options)
        .await
        .unwrap();
    c.insert("u", items(1, 0, 3)).await.unwrap();
    verify(&c.sample("u", 3).await.unwrap());
    // A plaintext client gets nothing from a TLS server.
    if let Ok(mut plain) = ReplayClient::connect(&server.url(false), ClientOptions::default()).await
    {
        assert!(plain.info(None).await.is_err());
    }

    // A key that does not belong to the certificate is refused at start-up,
    // naming the flag.
    let e = ServerTls::from_files(cert_path, &files.other_key, None).unwrap_err();
    assert!(e.to_string().contains("--tls-key"), "{e}");
    server.stop().await.unwrap();
}
