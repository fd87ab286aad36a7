//! How a binary ends on an error: one line a person can act on, never a backtrace.
//!
//! `fn main() -> anyhow::Result<()>` prints the error's `Debug` form, which lists every cause
//! and, with `RUST_BACKTRACE` set, a backtrace meant for the developer. Transport errors also
//! wrap an error whose message repeats theirs ("tcp connect error: tcp connect error"). A
//! binary's `main` returns [`exit`] of its result instead: the causes joined by `: ` with
//! repeats dropped, prefixed by the program's name, and exit code 1.

use std::error::Error;
use std::process::ExitCode;

/// The message of `error` and its causes, joined by `: `, dropping a cause whose message the
/// text so far already ends with (hyper and tonic wrap errors that say the same thing again).
pub fn error_chain(error: &(dyn Error + 'static)) -> String {
    let mut text = String::new();
    let mut next = Some(error);
    while let Some(error) = next {
        let message = error.to_string();
        let message = message.trim();
        if !message.is_empty() && !text.ends_with(message) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(message);
        }
        next = error.source();
    }
    text
}

/// Ends `main`: success is exit code 0; an error is printed to standard error as
/// `<program>: error: <chain>` ([`error_chain`]) with exit code 1.
/// Takes any error that lends itself as a `dyn Error` (`anyhow::Error` does).
pub fn exit<E: AsRef<dyn Error + 'static>>(program: &str, result: Result<(), E>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{program}: error: {}", error_chain(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Plain(&'static str, Option<Box<Plain>>);

    impl std::fmt::Display for Plain {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Plain {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn Error + 'static))
        }
    }

    #[test]
    fn a_cause_that_repeats_the_message_is_said_once() {
        let error = Plain(
            "transport error",
            Some(Box::new(Plain(
                "tcp connect error",
                Some(Box::new(Plain(
                    "tcp connect error",
                    Some(Box::new(Plain("Connection refused (os error 111)", None))),
                ))),
            ))),
        );
        assert_eq!(
            error_chain(&error),
            "transport error: tcp connect error: Connection refused (os error 111)"
        );
    }

    #[test]
    fn anyhow_context_reads_as_one_line() {
        let error = anyhow::Error::new(Plain("Connection refused (os error 111)", None))
            .context("dialing the agent at /run/nimbess/agent.sock (is nimbess-agent running?)");
        let error: &(dyn Error + 'static) = error.as_ref();
        assert_eq!(
            error_chain(error),
            "dialing the agent at /run/nimbess/agent.sock (is nimbess-agent running?): \
             Connection refused (os error 111)"
        );
    }

    #[test]
    fn empty_messages_add_no_separator() {
        let error = Plain("outer", Some(Box::new(Plain("", None))));
        assert_eq!(error_chain(&error), "outer");
    }
}
