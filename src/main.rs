//! The `heartbeat` binary: parse arguments, run the command, map errors to exit codes.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(heartbeat::app::main())
}
