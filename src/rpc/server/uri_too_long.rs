//! [`Explain414`]: a connection whose blank `414 URI Too Long` says why.
//!
//! hyper refuses a request whose URI is over [`MAX_URI_BYTES`] itself, before any handler
//! sees it, with a 414 that has no body: a browser shows a blank page. The explorer's call
//! form once sent long init code that way. This wrapper around the socket recognises that
//! one response as hyper writes it (its status line, `content-length: 0`, nothing after the
//! head) and sends in its place the same status with a text that says what happened and what
//! to do. Every other byte passes through untouched.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest URI hyper reads (`proto/h1/role.rs`, `MAX_URI_LEN`).
pub(crate) const MAX_URI_BYTES: usize = u16::MAX as usize - 1;

/// The head hyper writes for a URI over [`MAX_URI_BYTES`].
const HYPER_414: &[u8] = b"HTTP/1.1 414 URI Too Long\r\n";

/// What is sent instead.
fn explained() -> Vec<u8> {
    let body = format!(
        "URI Too Long: the request's URI (its path and query) is over {MAX_URI_BYTES} bytes, \
         the most this server reads.\n\nJSON-RPC takes its requests by POST, in the body. The \
         explorer's call form (/explorer/call, where the explorer is served) sends a call by \
         POST as well, where init code and call data of any length fit: open the form and paste \
         the data there. A link to a call carries the call in its URL, so only a call that fits \
         makes a link.\n"
    );
    format!(
        "HTTP/1.1 414 URI Too Long\r\ncontent-type: text/plain; charset=utf-8\r\n\
         x-content-type-options: nosniff\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Whether `head` is hyper's own blank 414: its status line, no body, nothing after it.
fn is_hypers_414(head: &[u8]) -> bool {
    head.starts_with(HYPER_414)
        && head.ends_with(b"\r\n\r\n")
        && head.windows(19).any(|w| w.eq_ignore_ascii_case(b"\r\ncontent-length: 0"))
}

/// A connection that sends an explained 414 in place of hyper's blank one; see the module.
#[derive(Debug)]
pub(crate) struct Explain414<T> {
    inner: T,
    /// The replacement being written, how much of it is written, and the length of the head
    /// it replaces (reported as written once the replacement is).
    sending: Option<(Vec<u8>, usize, usize)>,
}

impl<T> Explain414<T> {
    pub(crate) fn new(inner: T) -> Self {
        Self { inner, sending: None }
    }
}

impl<T: AsyncWrite + Unpin> Explain414<T> {
    /// Writes the rest of the replacement; ready with the replaced head's length when done.
    fn send(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        while let Some((bytes, written, replaced)) = &mut self.sending {
            if *written == bytes.len() {
                let replaced = *replaced;
                self.sending = None;
                return Poll::Ready(Ok(replaced));
            }
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        Poll::Ready(Ok(0))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Explain414<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Explain414<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.sending.is_none() && is_hypers_414(buf) {
            self.sending = Some((explained(), 0, buf.len()));
        }
        if self.sending.is_some() {
            return self.send(cx);
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        // hyper writes the head as the first slice, and nothing after it here.
        let mut parts = bufs.iter().filter(|b| !b.is_empty());
        if self.sending.is_none()
            && let (Some(head), None) = (parts.next(), parts.next())
            && is_hypers_414(head)
        {
            self.sending = Some((explained(), 0, head.len()));
        }
        if self.sending.is_some() {
            return self.send(cx);
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.sending.is_some() {
            ready!(self.send(cx))?;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.sending.is_some() {
            ready!(self.send(cx))?;
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn only_hypers_blank_414_is_replaced() {
        let hyper = b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert!(is_hypers_414(hyper));
        // A 414 with a body (a handler's), another status, a head with more after it: kept.
        assert!(!is_hypers_414(b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 5\r\n\r\n"));
        assert!(!is_hypers_414(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"));
        assert!(!is_hypers_414(b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n\r\nabc"));

        for vectored in [false, true] {
            let (client, server) = tokio::io::duplex(64);
            let mut conn = Explain414::new(server);
            let writer = tokio::spawn(async move {
                if vectored {
                    let bufs = [IoSlice::new(hyper), IoSlice::new(b"")];
                    let n = std::future::poll_fn(|cx| {
                        Pin::new(&mut conn).poll_write_vectored(cx, &bufs)
                    })
                    .await
                    .unwrap();
                    assert_eq!(n, hyper.len());
                } else {
                    conn.write_all(hyper).await.unwrap();
                }
                conn.shutdown().await.unwrap();
            });
            let mut got = String::new();
            let mut client = client;
            client.read_to_string(&mut got).await.unwrap();
            writer.await.unwrap();
            assert!(got.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{got}");
            let (head, body) = got.split_once("\r\n\r\n").unwrap();
            assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
            assert!(body.contains("65534 bytes") && body.contains("POST"), "{body}");
        }
        // Anything else passes through as written.
        let (mut client, server) = tokio::io::duplex(64);
        let mut conn = Explain414::new(server);
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        tokio::spawn(async move {
            conn.write_all(ok).await.unwrap();
            conn.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, ok);
    }
}
