//! What the runtime bounds for every call, whatever the service: how many run at once in the
//! daemon, and what its status says. A request that cannot be decoded is the client's mistake
//! (INVALID_ARGUMENT, where tonic answers INTERNAL), and a status message longer than
//! [`MAX_STATUS_MESSAGE`] bytes is cut, so a handler echoing a megabyte of input cannot make the
//! answer unreadable.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderMap, HeaderValue, Request, Response};
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{Layer, Service};

use crate::status::MAX_STATUS_MESSAGE;

/// Default cap on calls in progress in one daemon (streams count until they end).
pub const DEFAULT_MAX_CALLS: usize = 1024;

/// Default cap on concurrent HTTP/2 streams per connection.
pub const DEFAULT_MAX_STREAMS_PER_CONNECTION: u32 = 128;

/// tonic's message for a request it cannot decode (prost's `DecodeError`), as sent in
/// `grpc-message`: percent-encoded, spaces included.
const DECODE_ERROR: &[&str] = &[
    "failed%20to%20decode%20Protobuf%20message",
    "failed to decode Protobuf message",
];

const HEALTH_PREFIX: &str = "/grpc.health.v1.Health/";

#[derive(Debug, Clone)]
pub(crate) struct CallLimitsLayer {
    calls: Arc<Semaphore>,
    max_calls: usize,
}

impl CallLimitsLayer {
    pub(crate) fn new(max_calls: usize) -> Self {
        CallLimitsLayer {
            calls: Arc::new(Semaphore::new(max_calls)),
            max_calls,
        }
    }
}

impl<S> Layer<S> for CallLimitsLayer {
    type Service = CallLimits<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallLimits {
            inner,
            layer: self.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct CallLimits<S> {
    inner: S,
    layer: CallLimitsLayer,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for CallLimits<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResBody: Body + Default + Unpin + Send + 'static,
{
    type Response = Response<LimitedBody<ResBody>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // Health always answers, so a daemon at its cap is not restarted for it.
        let permit = if request.uri().path().starts_with(HEALTH_PREFIX) {
            None
        } else {
            match Arc::clone(&self.layer.calls).try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    let status = tonic::Status::resource_exhausted(format!(
                        "the daemon is serving its limit of {} calls; retry later",
                        self.layer.max_calls
                    ));
                    let response = status.into_http::<ResBody>().map(|inner| LimitedBody {
                        inner,
                        _permit: None,
                    });
                    return Box::pin(std::future::ready(Ok(response)));
                }
            }
        };
        let future = self.inner.call(request);
        Box::pin(async move {
            let mut response = future.await?;
            mend_status(response.headers_mut());
            Ok(response.map(|inner| LimitedBody {
                inner,
                _permit: permit,
            }))
        })
    }
}

/// The response body, holding the call's place under the cap until it ends.
pub(crate) struct LimitedBody<B> {
    inner: B,
    _permit: Option<OwnedSemaphorePermit>,
}

impl<B: Body + Unpin> Body for LimitedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let mut polled = std::task::ready!(Pin::new(&mut this.inner).poll_frame(cx));
        if let Some(Ok(frame)) = &mut polled
            && let Some(trailers) = frame.trailers_mut()
        {
            mend_status(trailers);
        }
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Undecodable request → INVALID_ARGUMENT; `grpc-message` cut to its bound.
pub(crate) fn mend_status(headers: &mut HeaderMap) {
    let message = headers.get("grpc-message").map(HeaderValue::as_bytes);
    if headers.get("grpc-status").map(HeaderValue::as_bytes) == Some(b"13")
        && message.is_some_and(|m| DECODE_ERROR.iter().any(|d| m.starts_with(d.as_bytes())))
    {
        headers.insert("grpc-status", HeaderValue::from_static("3"));
    }
    // Percent-encoding at most triples the message.
    let limit = MAX_STATUS_MESSAGE * 3;
    if let Some(message) = headers.get("grpc-message")
        && message.len() > limit
    {
        let bytes = message.as_bytes();
        let mut cut = limit - 16;
        // Not inside a %XX escape, nor before a UTF-8 continuation byte.
        while cut > 0 && (bytes[cut - 1] == b'%' || (cut >= 2 && bytes[cut - 2] == b'%')) {
            cut -= 1;
        }
        while cut >= 3
            && bytes[cut] == b'%'
            && matches!(
                bytes.get(cut + 1),
                Some(b'8' | b'9' | b'A' | b'B' | b'a' | b'b')
            )
        {
            cut -= 3;
            while cut > 0 && bytes[cut] != b'%' && bytes[cut - 1] == b'%' {
                cut -= 1;
            }
        }
        let mut shortened = bytes[..cut].to_vec();
        shortened.extend_from_slice(b"%E2%80%A6 (cut)");
        if let Ok(value) = HeaderValue::from_bytes(&shortened) {
            headers.insert("grpc-message", value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_errors_become_invalid_argument_and_long_messages_are_cut() {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-status", HeaderValue::from_static("13"));
        headers.insert(
            "grpc-message",
            HeaderValue::from_static("failed to decode Protobuf message: Req.name: invalid string value: data is not UTF-8 encoded"),
        );
        mend_status(&mut headers);
        assert_eq!(headers["grpc-status"], "3");

        let mut headers = HeaderMap::new();
        headers.insert("grpc-status", HeaderValue::from_static("13"));
        headers.insert("grpc-message", HeaderValue::from_static("database is gone"));
        mend_status(&mut headers);
        assert_eq!(headers["grpc-status"], "13", "other internal errors stay");

        let long = format!("no such id {}", "%C3%A9".repeat(5000));
        headers.insert("grpc-message", HeaderValue::from_str(&long).unwrap());
        mend_status(&mut headers);
        let cut = headers["grpc-message"].to_str().unwrap();
        assert!(cut.len() <= MAX_STATUS_MESSAGE * 3 + 16, "{}", cut.len());
        assert!(
            cut.ends_with("%C3%A9%E2%80%A6 (cut)"),
            "{}",
            &cut[cut.len() - 40..]
        );
    }
}
