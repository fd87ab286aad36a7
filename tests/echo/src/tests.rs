use super::{body, listen_addresses, pod_name, request_path, response};

#[test]
fn the_path_is_read_from_a_complete_request_line_only() {
    assert_eq!(
        request_path(b"GET /a/b?c=1 HTTP/1.1\r\nHost: x\r\n").unwrap(),
        Some("/a/b?c=1".to_owned())
    );
    assert_eq!(request_path(b"GET /a HTTP/1.1").unwrap(), None);
    for bad in [
        &b"GET\r\n"[..],
        b"GET a HTTP/1.1\r\n",
        b"GET / SPDY\r\n",
        b"GET / HTTP/1.1 x\r\n",
    ] {
        let err = request_path(bad).unwrap_err();
        assert!(err.contains("request line"), "{err}");
    }
}

#[test]
fn the_answer_names_the_pod_and_the_path_with_its_length() {
    let text = response("200 OK", &body("echo-1", "/hello"));
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("content-length: 14\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\necho-1 /hello\n"), "{text}");
}

#[test]
fn the_pod_name_comes_from_the_environment_then_the_host_name() {
    assert_eq!(pod_name(Some("a".into()), || Some("h".into())), "a");
    assert_eq!(pod_name(Some(String::new()), || Some("h".into())), "h");
    assert_eq!(pod_name(None, || None), "unknown");
}

#[test]
fn the_listen_addresses_come_from_the_flags_then_the_environment() {
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        listen_addresses(&args(&[]), None).unwrap(),
        ["0.0.0.0:8080"]
    );
    assert_eq!(
        listen_addresses(&args(&[]), Some(":1, :2".into())).unwrap(),
        [":1", ":2"]
    );
    assert_eq!(
        listen_addresses(&args(&["--listen", "1.2.3.4:5"]), Some("x".into())).unwrap(),
        ["1.2.3.4:5"]
    );
    assert_eq!(
        listen_addresses(
            &args(&["--listen=0.0.0.0:80,0.0.0.0:81", "--listen", "[::]:82"]),
            None
        )
        .unwrap(),
        ["0.0.0.0:80", "0.0.0.0:81", "[::]:82"]
    );
    assert!(
        listen_addresses(&args(&["--port", "1"]), None)
            .unwrap_err()
            .contains("--port")
    );
    assert!(
        listen_addresses(&args(&["--listen"]), None)
            .unwrap_err()
            .contains("needs an address")
    );
    assert!(listen_addresses(&args(&["--listen="]), None).is_err());
}
