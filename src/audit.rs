//! Audit log (owner: lead).
