//! Kernel conformance harness.
