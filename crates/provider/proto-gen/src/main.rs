//! Writes the Rust code of the vendored protos into `crates/provider/src/proto/`.

use std::path::Path;

fn main() {
    let provider = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let proto = provider.join("proto");
    let out = provider.join("src").join("proto");
    let files = ["tfplugin6.6.proto", "grpc_controller.proto"];
    let set = protox::compile(files, [&proto]).expect("compile the protos");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .generate_default_stubs(true)
        .out_dir(&out)
        .compile_fds(set)
        .expect("generate the Rust code");
    println!("wrote {}", out.display());
}
