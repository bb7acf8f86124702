//! Ports: AF_PACKET sockets and TAP devices driven by io_uring, and pcap files, behind one
//! interface ([`PortGroup`]). The only crate of wasp that makes syscalls.
