//! The physical floor of a JSON-RPC answer over HTTP on this machine (issue 14): a bare hyper
//! server that reads each request body and answers a fixed JSON-RPC response, nothing else.
//! `benches/sidebyside.sh` loads it at the same concurrencies as loupe and reth.
//!
//! With an answers file (lines of `request body<TAB>response`, recorded from a node), a request
//! whose body is listed gets that response: the floor then sends the very bytes a node must
//! send for it (a transaction object is ~1 KB, a trace several), and only the work of producing
//! them is left out. Any other body gets a short fixed answer.
//!
//! `cargo run --release --example floor -- PORT [ANSWERS]`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

const ANSWER: &[u8] = br#"{"jsonrpc":"2.0","id":1,"result":"floor"}"#;

type Answers = HashMap<Bytes, Bytes>;

async fn answer(
    answers: Arc<Answers>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    // Read the whole body, as a real server must before it can parse the request.
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let answer = answers.get(&body).cloned().unwrap_or(Bytes::from_static(ANSWER));
    let mut res = Response::new(Full::new(answer));
    res.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(res)
}

#[tokio::main]
async fn main() {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(18600);
    let mut answers = Answers::new();
    if let Some(path) = std::env::args().nth(2) {
        for line in std::fs::read_to_string(&path).expect("answers file").lines() {
            let (body, response) = line.split_once('\t').expect("body<TAB>response");
            answers.insert(Bytes::from(body.to_owned()), Bytes::from(response.to_owned()));
        }
    }
    let answers = Arc::new(answers);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        stream.set_nodelay(true).ok();
        let answers = answers.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| answer(answers.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
