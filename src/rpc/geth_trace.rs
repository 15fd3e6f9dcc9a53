//! geth-style tracing (`debug_trace*`): placeholder, being built.

use jsonrpsee::RpcModule;

use super::RpcContext;

/// Registers the `debug_trace*` methods.
pub(crate) fn register(
    _m: &mut RpcModule<RpcContext>,
) -> Result<(), jsonrpsee::server::RegisterMethodError> {
    Ok(())
}
