//! A tiny echo backend for the walk-through: `echo ADDR NAME` answers every request with
//! `NAME <method> <target> (Host: …, X-Forwarded-For: …, X-Forwarded-Proto: …)`.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(address), Some(name)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: echo ADDR NAME");
    };
    let name: &'static str = Box::leak(name.into_boxed_str());
    let listener = tokio::net::TcpListener::bind(&address).await?;
    eprintln!("{name} listening on {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(async move {
            let service = service_fn(
                move |request: hyper::Request<hyper::body::Incoming>| async move {
                    let header = |n: &str| {
                        request
                            .headers()
                            .get(n)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("-")
                            .to_owned()
                    };
                    let body = format!(
                        "{name} {} {} (Host: {}, X-Forwarded-For: {}, X-Forwarded-Proto: {})\n",
                        request.method(),
                        request.uri().path_and_query().map_or("/", |p| p.as_str()),
                        header("host"),
                        header("x-forwarded-for"),
                        header("x-forwarded-proto"),
                    );
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(body))))
                },
            );
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
