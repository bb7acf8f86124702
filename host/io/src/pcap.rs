//! Capture files as ports (filled in below).

/// Placeholder.
pub struct PcapGroup;
/// Placeholder.
pub struct PcapPort;
