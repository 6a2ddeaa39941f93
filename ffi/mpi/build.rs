//! Compiles the `MPI_*` wrappers (`c/*.c`) with the system's MPI compiler wrapper and links the
//! library against MPI as that wrapper says.
//!
//! The compiler is `$MPICC`, else `mpicc` on the `PATH`. Its link flags come from
//! `mpicc --showme:link` (Open MPI) or, failing that, `mpicc -show` (MPICH, Intel MPI): the
//! `-L`, `-l` and `-Wl,-rpath` arguments are handed to rustc. Without an MPI compiler the build
//! stops with one message saying what is missing and how to install it or point at it.
//!
//! The wrappers must be exported from `libwaffle_mpi.so`, but rustc exports only Rust's own
//! symbols from a cdylib (its version script makes every other one local): `exports.map` adds
//! `MPI_*` to the exported symbols.

use std::{
    env,
    path::{Path, PathBuf},
    process::Command,
};

const SOURCES: &[&str] = &["c/comm.c", "c/p2p.c", "c/persistent.c", "c/wait.c", "c/coll.c", "c/rma.c"];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    println!("cargo:rerun-if-env-changed=MPICC");
    println!("cargo:rerun-if-env-changed=PATH");
    for file in SOURCES.iter().chain(&["c/wmpi.h", "exports.map"]) {
        println!("cargo:rerun-if-changed={file}");
    }
    let mpicc = match env::var_os("MPICC").filter(|m| !m.is_empty()) {
        Some(name) => match find(Path::new(&name)) {
            Some(m) => m,
            None => missing(&format!("MPICC={:?} names no program", name.to_string_lossy())),
        },
        None => match find(Path::new("mpicc")) {
            Some(m) => m,
            None => missing("no MPI C compiler wrapper: `mpicc` is not on the PATH and MPICC is not set"),
        },
    };
    let flags = match link_flags(&mpicc) {
        Ok(f) => f,
        Err(why) => missing(&why),
    };

    cc::Build::new()
        .compiler(&mpicc)
        .files(SOURCES.iter().map(|s| manifest.join(s)))
        .include(manifest.join("c"))
        .include(manifest.join("../include"))
        .flag("-std=gnu11")
        .flag_if_supported("-fvisibility=default")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        // Every object, not only those the Rust code refers to (it refers to none).
        .link_lib_modifier("+whole-archive")
        .compile("waffle_mpi_wrappers");

    for flag in flags {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        } else if flag.starts_with("-Wl,") || flag == "-pthread" {
            println!("cargo:rustc-cdylib-link-arg={flag}");
        }
    }
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={}", manifest.join("exports.map").display());
}

/// `program` if it is a path to a file, else the file of that name on the `PATH`.
fn find(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_owned());
    }
    let path = env::var_os("PATH")?;
    env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}

/// The link arguments `mpicc` adds, from `--showme:link` or `-show`.
fn link_flags(mpicc: &Path) -> Result<Vec<String>, String> {
    let run = |arg: &str| {
        Command::new(mpicc)
            .arg(arg)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    if let Some(text) = run("--showme:link") {
        return Ok(text.split_whitespace().map(str::to_owned).collect());
    }
    if let Some(text) = run("-show") {
        // `cc ... -L... -lmpi`: the compiler's name first, then its arguments.
        return Ok(text.split_whitespace().skip(1).map(str::to_owned).collect());
    }
    Err(format!(
        "`{} --showme:link` and `{} -show` both failed: is it an MPI compiler wrapper?",
        mpicc.display(),
        mpicc.display()
    ))
}

/// Stops the build with one message.
fn missing(what: &str) -> ! {
    eprintln!(
        "\nerror: waffle-mpi needs an MPI installation to build: {what}.\n\
         Install one (Debian/Ubuntu: `apt-get install openmpi-bin libopenmpi-dev`; \
         Fedora: `dnf install openmpi-devel` and `module load mpi`), or point at one with \
         MPICC=/path/to/mpicc.\n\
         The rest of the workspace builds without MPI: `cargo build` leaves waffle-mpi out.\n"
    );
    std::process::exit(1);
}
