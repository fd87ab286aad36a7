//! Preparer benchmarks.

fn main() {}
