//! Prints the generated corpus: index (from 1), name, length.
fn main() {
    for (i, g) in wasp_conformance::generate::corpus().iter().enumerate() {
        println!("{} {} {}", i + 1, g.name, g.frame.len());
    }
}
