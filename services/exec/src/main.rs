//! `fluxgate-exec`: the exec service binary; all logic lives in the library.

/// mimalloc, as in the job manager: many small allocations per job stream.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // Before anything opens descriptors of its own: whatever the starting
    // shell or supervisor left open would otherwise reach every task.
    if let Err(e) = fluxgate_os::fds::close_inherited() {
        eprintln!("fluxgate-exec: cannot close inherited descriptors: {e}");
        return std::process::ExitCode::FAILURE;
    }
    fluxgate_exec::cli::main()
}
