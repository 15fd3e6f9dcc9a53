//! The URL a `loupe` process serves JSON-RPC at, read from the line it prints at start: shared
//! by the tests that drive the binary and wait for its server.

#![allow(dead_code, unreachable_pub)]

/// `http://127.0.0.1:PORT` from the log line announcing the JSON-RPC server.
pub fn served_url(line: &str) -> Option<String> {
    const HOST: &str = "http://127.0.0.1:";
    if !line.contains("serving JSON-RPC") {
        return None;
    }
    let rest = &line[line.find(HOST)? + HOST.len()..];
    let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(format!("{HOST}{port}"))
}
