//! Unit tests of the Gateway API model.
