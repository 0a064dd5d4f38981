// Generates the API's Rust types, clients and servers from proto/tunehub/v1/*.proto, and a file
// descriptor set for the reflection service. protoc comes vendored (no system package needed)
// unless PROTOC names one.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("PROTOC").is_none() {
        // SAFETY: build scripts are single-threaded; nothing else reads the environment yet.
        unsafe { std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?) };
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("tunehub_v1_descriptor.bin"))
        // The web dashboard answers its page's requests with the API's own messages as JSON
        // (server/src/dashboard): one shape for gRPC and the browser, nothing to keep in step.
        .type_attribute(".tunehub.v1", "#[derive(serde::Serialize)]")
        .compile_protos(&["tunehub/v1/tunehub.proto"], &["."])?;
    println!("cargo:rerun-if-changed=tunehub");
    Ok(())
}
