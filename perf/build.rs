//! Links DPDK's `librte_acl` and `librte_eal` (found with pkg-config's `libdpdk`) when the
//! `dpdk` feature is on; without it, nothing is linked and nothing DPDK is needed.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "dpdk")]
    {
        let lib = pkg_config::Config::new()
            .cargo_metadata(false)
            .probe("libdpdk")
            .expect("feature `dpdk` needs DPDK's development files (apt-get install libdpdk-dev)");
        for p in &lib.link_paths {
            println!("cargo:rustc-link-search=native={}", p.display());
        }
        println!("cargo:rustc-link-lib=dylib=rte_acl");
        println!("cargo:rustc-link-lib=dylib=rte_eal");
    }
}
