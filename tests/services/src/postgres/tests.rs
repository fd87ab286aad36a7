use super::*;

const READY_PID_FILE: &str = "4242\n/tmp/x/data\n1732270000\n54321\n/tmp/x/sockets\n127.0.0.1\n  1234567     65536\nready   \n";

#[test]
fn a_postmaster_pid_file_saying_ready_on_our_port_means_ready() {
    assert!(postmaster_ready(READY_PID_FILE, 54321));
}

#[test]
fn starting_another_port_or_a_short_file_is_not_ready() {
    assert!(!postmaster_ready(READY_PID_FILE, 54322));
    assert!(!postmaster_ready(
        &READY_PID_FILE.replace("ready", "starting"),
        54321
    ));
    assert!(!postmaster_ready(
        "4242\n/tmp/x/data\n1732270000\n54321\n",
        54321
    ));
    assert!(!postmaster_ready("", 54321));
}

#[test]
fn identifiers_are_quoted_with_embedded_quotes_doubled() {
    assert_eq!(quote_identifier("orders"), "\"orders\"");
    assert_eq!(quote_identifier("we\"ird; DROP"), "\"we\"\"ird; DROP\"");
}

#[test]
fn database_names_are_percent_encoded_in_urls() {
    assert_eq!(percent_encode("app_test-1"), "app_test-1");
    assert_eq!(percent_encode("a b/c"), "a%20b%2Fc");
    assert_eq!(percent_encode("é"), "%C3%A9");
}
