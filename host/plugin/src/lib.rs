//! wasp's plugin host: loads WebAssembly components built against `wit/plugin.wit` and serves
//! them to the engine through [`wasp_core::Extensions`]. Filled by the plugin issue.
