//! The physical floor of a JSON-RPC answer over HTTP on this machine (issue 14): a bare hyper
//! server that reads each request body and answers a fixed JSON-RPC response, nothing else.
//! `benches/sidebyside.sh` loads it at the same concurrencies as loupe and reth.
//!
//! `cargo run --release --example floor -- PORT`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

const ANSWER: &[u8] = br#"{"jsonrpc":"2.0","id":1,"result":"floor"}"#;

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    // Read the whole body, as a real server must before it can parse the request.
    let _ = req.into_body().collect().await;
    let mut res = Response::new(Full::new(Bytes::from_static(ANSWER)));
    res.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(res)
}

#[tokio::main]
async fn main() {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(18600);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        stream.set_nodelay(true).ok();
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), hyper::service::service_fn(answer))
                .await;
        });
    }
}
