//! End-to-end tests live in tests/tests/.
