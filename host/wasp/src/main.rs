//! The `wasp` command line.

fn main() {}
