//! Compiles the C shim against the interpreter's `internal/` headers.
use std::process::Command;

fn main() {
    pyo3_build_config::use_pyo3_cfgs();
    let config = pyo3_build_config::get();
    let python = config.executable().unwrap_or("python3").to_owned();
    let output = Command::new(&python)
        .args(["-c", "import sysconfig; print(sysconfig.get_paths()['include'])"])
        .output()
        .expect("running the Python interpreter to find its headers");
    assert!(output.status.success(), "{python} could not report its include directory");
    let include = String::from_utf8(output.stdout).expect("utf-8 include path");
    let include = include.trim();
    println!("cargo:rerun-if-changed=rust/ffi/shim.c");
    // The interpreter built against: `cargo bench` gives its embedded CPython that
    // interpreter's site-packages (a venv's torch), which it would not find on its own.
    println!("cargo:rustc-env=FASTDYNAMO_BUILD_PYTHON={python}");
    cc::Build::new()
        .file("rust/ffi/shim.c")
        .include(include)
        .include(format!("{include}/internal"))
        .warnings(true)
        .flag_if_supported("-O2")
        .compile("fastdynamo_shim");
    // `cargo test` and `cargo bench` embed CPython: link it and find it at run time.
    if std::env::var_os("CARGO_FEATURE_EXTENSION_MODULE").is_none() {
        if let Some(lib_dir) = config.lib_dir() {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_dir}");
        }
    }
}
