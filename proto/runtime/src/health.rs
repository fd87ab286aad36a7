//! grpc.health.v1 with one addition: once the daemon is draining, Watch
//! streams end right after telling the watcher NOT_SERVING, so that open
//! watches do not hold the drain until the grace period runs out.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_server::Health;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_health::server::HealthService;

use crate::shutdown::ShutdownHandle;

pub(crate) struct DrainingHealth {
    inner: HealthService,
    shutdown: ShutdownHandle,
}

impl DrainingHealth {
    pub(crate) fn new(inner: HealthService, shutdown: ShutdownHandle) -> Self {
        DrainingHealth { inner, shutdown }
    }
}

type ResponseStream = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Health for DrainingHealth {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        self.inner.check(request).await
    }

    type WatchStream = ResponseStream;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let inner = self.inner.watch(request).await?.into_inner();
        Ok(Response::new(Box::pin(UntilDrained {
            inner,
            shutdown: self.shutdown.clone(),
            finished: false,
        })))
    }
}

struct UntilDrained<S> {
    inner: S,
    shutdown: ShutdownHandle,
    finished: bool,
}

impl<S> Stream for UntilDrained<S>
where
    S: Stream<Item = Result<HealthCheckResponse, Status>> + Unpin,
{
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(None);
        }
        let item = std::task::ready!(Pin::new(&mut this.inner).poll_next(cx));
        if let Some(Ok(response)) = &item
            && response.status == ServingStatus::NotServing as i32
            && this.shutdown.is_triggered()
        {
            this.finished = true;
        }
        Poll::Ready(item)
    }
}
