use super::*;

fn tcp(host: &str, port: u16, tls: bool) -> Endpoint {
    Endpoint::Tcp {
        host: host.to_owned(),
        port,
        tls,
    }
}

#[test]
fn parses_every_documented_spelling() {
    let cases = [
        ("127.0.0.1:50051", tcp("127.0.0.1", 50051, false)),
        ("tcp://127.0.0.1:50051", tcp("127.0.0.1", 50051, false)),
        ("http://localhost:80/", tcp("localhost", 80, false)),
        (
            "https://preparer.example:443",
            tcp("preparer.example", 443, true),
        ),
        ("[::1]:0", tcp("::1", 0, false)),
        ("tcp://[::]:7", tcp("::", 7, false)),
        (
            "unix:///run/nephrite.sock",
            Endpoint::unix("/run/nephrite.sock"),
        ),
        (
            "unix:/run/nephrite.sock",
            Endpoint::unix("/run/nephrite.sock"),
        ),
        ("/run/nephrite.sock", Endpoint::unix("/run/nephrite.sock")),
        ("unix:agent.sock", Endpoint::unix("agent.sock")),
        ("  127.0.0.1:1  ", tcp("127.0.0.1", 1, false)),
    ];
    for (text, want) in cases {
        assert_eq!(text.parse::<Endpoint>(), Ok(want), "{text}");
    }
}

#[test]
fn display_round_trips() {
    for text in [
        "tcp://127.0.0.1:50051",
        "https://example.org:443",
        "tcp://[::1]:9",
        "unix:///run/x.sock",
        "unix:rel.sock",
    ] {
        let endpoint: Endpoint = text.parse().expect(text);
        assert_eq!(endpoint.to_string(), text);
        assert_eq!(endpoint.to_string().parse::<Endpoint>(), Ok(endpoint));
    }
}

#[test]
fn errors_name_the_bad_string() {
    let cases = [
        "",
        "ftp://host:1",
        "localhost",
        "localhost:http",
        "localhost:70000",
        ":80",
        "tcp://host:1/path",
        "unix:",
        "unix://",
        "unix://run/x.sock",
        "::1:80",
    ];
    for text in cases {
        let err = text.parse::<Endpoint>().expect_err(text);
        if !text.is_empty() {
            assert!(err.to_string().contains(&format!("{text:?}")), "{err}");
        }
    }
    assert!(matches!(
        "localhost:70000".parse::<Endpoint>(),
        Err(EndpointError::InvalidPort { .. })
    ));
    assert!(matches!(
        "unix://run/x.sock".parse::<Endpoint>(),
        Err(EndpointError::UnixNotAbsolute { .. })
    ));
}

#[test]
fn helpers() {
    let e = Endpoint::tcp("127.0.0.1:5".parse().expect("addr"));
    assert_eq!(e.authority().as_deref(), Some("127.0.0.1:5"));
    assert!(!e.is_tls());
    assert!(e.clone().with_tls().is_tls());
    assert_eq!(e.unix_path(), None);
    let u = Endpoint::unix("/tmp/a.sock");
    assert_eq!(u.unix_path(), Some(Path::new("/tmp/a.sock")));
    assert_eq!(u.authority(), None);
}

#[test]
fn ports_are_digits_only() {
    for text in [
        "localhost:+80",
        "localhost:-1",
        "localhost: 80",
        "localhost:8_0",
        "[::1]:+1",
    ] {
        assert!(
            matches!(
                text.parse::<Endpoint>(),
                Err(EndpointError::InvalidPort { .. })
            ),
            "{text}: {:?}",
            text.parse::<Endpoint>()
        );
    }
    assert_eq!("h:080".parse::<Endpoint>(), Ok(tcp("h", 80, false)));
}

#[test]
fn unix_paths_too_long_for_sockaddr_un_are_named() {
    let fits = format!("/{}", "a".repeat(MAX_UNIX_SOCKET_PATH - 1));
    let too_long = format!("/{}", "a".repeat(MAX_UNIX_SOCKET_PATH));
    assert_eq!(fits.parse::<Endpoint>(), Ok(Endpoint::unix(&fits)));
    for text in [
        too_long.clone(),
        format!("unix://{too_long}"),
        format!("unix:a{}", &too_long[1..]),
    ] {
        let err = text.parse::<Endpoint>().expect_err(&text);
        assert!(
            matches!(err, EndpointError::InvalidSocketPath { .. }),
            "{err}"
        );
        let message = err.to_string();
        assert!(message.contains(&format!("{text:?}")), "{message}");
        assert!(
            message.contains(&format!(
                "is {} bytes, longer than the {MAX_UNIX_SOCKET_PATH}",
                MAX_UNIX_SOCKET_PATH + 1
            )),
            "{message}"
        );
    }
    assert_eq!(
        unix_path_problem(Path::new("")).as_deref(),
        Some("the socket path is empty")
    );
}
