//! Child processes: own process group, concurrent capped capture, timeout with SIGTERM then
//! SIGKILL to the group, always reaped. OWNER: tools helper.
