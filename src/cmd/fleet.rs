//! `heartbeat fleet forget NODE` (docs/fleet.md#one-name-one-node): free a node's name, so
//! that another state dir may take it; audited `node_forgotten`.

use super::Ctx;
use crate::audit::Event;
use crate::error::{Error, Result, exit};

pub(crate) fn forget(ctx: &Ctx, node: &str) -> Result<u8> {
    let mut d = ctx.decider()?;
    if d.cfg.fleet.is_none() {
        return Err(Error::Usage(
            "fleet forget: this config has no [fleet]; a single host has no nodes".into(),
        ));
    }
    if !d.store.forget_node(node)? {
        return Err(Error::Usage(format!(
            "fleet forget: no node {node:?} is registered (`heartbeat status` lists them)"
        )));
    }
    let by = d.by.clone();
    d.record(&Event::NodeForgotten {
        node_name: node,
        by: &by,
    })?;
    ctx.out().line(&format!(
        "forgot node {node}: its name is free for another state dir; its leases are released"
    ));
    Ok(exit::OK)
}
