//! `fluxgate-exec`: the exec service binary; all logic lives in the library.

/// mimalloc, as in the job manager: many small allocations per job stream.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    fluxgate_exec::cli::main()
}
