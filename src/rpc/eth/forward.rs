//! `eth_sendRawTransaction`: forwarded to the upstream while following (loupe itself has no
//! transaction pool and broadcasts nothing); a clear error otherwise.

use std::time::Duration;

use jsonrpsee::core::client::ClientT;
use jsonrpsee::http_client::HttpClientBuilder;
use jsonrpsee::rpc_params;
use jsonrpsee::types::Params;

use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::Args;
use crate::rpc::{RpcContext, RpcError, RpcResult};

/// How long a forwarded transaction may take.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);

impl RpcContext {
    /// `eth_sendRawTransaction(bytes)`.
    pub(crate) async fn send_raw_transaction(
        self: std::sync::Arc<Self>,
        p: Params<'static>,
    ) -> RpcResult<Raw> {
        let args = Args::new(&p, 1)?;
        let raw: alloy_primitives::Bytes = args.req(0, "transaction")?;
        let Some(url) = self.config.sync.get().forward_to else {
            return Err(RpcError::NoUpstream(
                "eth_sendRawTransaction: loupe has no transaction pool and broadcasts nothing; \
                 run `loupe follow --upstream URL` to forward transactions to the upstream",
            ));
        };
        let client = self
            .upstream
            .get_or_init(|| {
                HttpClientBuilder::default()
                    .request_timeout(FORWARD_TIMEOUT)
                    .build(&url)
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| RpcError::UpstreamUnavailable(e.clone()))?;
        let answer: Result<alloy_primitives::B256, _> =
            client.request("eth_sendRawTransaction", rpc_params![raw]).await;
        match answer {
            Ok(hash) => to_value(hash),
            Err(jsonrpsee::core::ClientError::Call(e)) => Err(RpcError::Upstream {
                code: e.code(),
                message: e.message().to_string(),
                data: e.data().map(|d| d.get().to_string()),
            }),
            Err(e) => Err(RpcError::UpstreamUnavailable(e.to_string())),
        }
    }
}
