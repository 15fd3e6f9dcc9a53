//! JSON-RPC server and methods.
