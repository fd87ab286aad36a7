//! What the TKO backend's tests (`tko_backend.rs`, `tko_auth.rs`) share: the example topology's
//! files and `preparer serve` flags parsed as the binary parses them.

use std::path::Path;

use nephrite_preparer::daemon::ServeCommand;

/// A file of `examples/free5gc`.
pub fn example(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/free5gc")
        .join(file);
    std::fs::read_to_string(path).expect("example file")
}

/// `preparer serve` flags, parsed as the binary parses them (so a new flag needs no edit here).
#[derive(clap::Parser)]
pub struct PreparerFlags {
    /// The `serve` command.
    #[command(flatten)]
    pub serve: ServeCommand,
}
