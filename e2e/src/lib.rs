//! e2e test helpers
