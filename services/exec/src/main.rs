//! `fluxgate-exec`: the exec service binary; all logic lives in the library.

fn main() -> std::process::ExitCode {
    fluxgate_exec::cli::main()
}
