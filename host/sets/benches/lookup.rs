//! Placeholder, replaced by the lookup benchmark.
fn main() {}
