//! Measurement error codes, numbered like Ansor's `MeasureErrorNO` where they overlap so that
//! records read the same.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    NoError = 0,
    /// The step list does not apply to the DAG (Ansor: InstantiationError).
    InvalidSchedule = 1,
    /// The C compiler rejected the kernel (Ansor: CompileHostError).
    CompileError = 2,
    /// The C compiler ran past its limit (Ansor: BuildTimeoutError).
    CompileTimeout = 3,
    /// The executable crashed or exited non-zero (Ansor: RuntimeDeviceError).
    RuntimeError = 4,
    /// The output differs from the reference (Ansor: WrongAnswer).
    WrongAnswer = 5,
    /// The executable ran past its limit (Ansor: RunTimeoutError).
    RunTimeout = 6,
    UnknownError = 7,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 8] = [
        ErrorCode::NoError,
        ErrorCode::InvalidSchedule,
        ErrorCode::CompileError,
        ErrorCode::CompileTimeout,
        ErrorCode::RuntimeError,
        ErrorCode::WrongAnswer,
        ErrorCode::RunTimeout,
        ErrorCode::UnknownError,
    ];

    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn from_code(c: i32) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|e| e.code() == c)
    }

    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::NoError => "ok",
            ErrorCode::InvalidSchedule => "invalid_schedule",
            ErrorCode::CompileError => "compile_error",
            ErrorCode::CompileTimeout => "compile_timeout",
            ErrorCode::RuntimeError => "runtime_error",
            ErrorCode::WrongAnswer => "wrong_answer",
            ErrorCode::RunTimeout => "run_timeout",
            ErrorCode::UnknownError => "unknown_error",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
