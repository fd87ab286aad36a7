//! A child process killed (SIGKILL) and reaped when dropped, so no test leaves a daemon behind.

use std::process::{Child, Command};

/// A spawned daemon; dropping it kills it.
pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Daemon {
    /// SIGTERM, and waits until it has exited.
    pub fn terminate(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }

    /// SIGKILL (`kill -9`: no chance to clean up), and waits until it is gone.
    pub fn kill(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
