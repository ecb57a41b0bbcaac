//! `heartbeat mcp-tools [SERVER] [--json]`: what each configured MCP server offers
//! (docs/reference.md#mcp-tools). Starts each server, lists its tools, stops it. Writes nothing.

use std::path::Path;

use serde_json::{Value, json};

use super::Ctx;
use crate::audit::Secrets;
use crate::cli::McpToolsArgs;
use crate::engine::mcp::Servers;
use crate::error::{Error, Result, exit};

pub(crate) fn run(ctx: &Ctx, args: &McpToolsArgs) -> Result<u8> {
    let cfg = ctx.load_config(&[])?;
    let names: Vec<&String> = match &args.server {
        Some(name) if !cfg.mcp.contains_key(name) => {
            let known: Vec<&str> = cfg.mcp.keys().map(String::as_str).collect();
            let mut message = format!("no MCP server \"{name}\" in the config");
            match crate::text::did_you_mean(name, &known) {
                Some(near) => message.push_str(&format!(" (did you mean \"{near}\"?)")),
                None if known.is_empty() => message.push_str(" (it has no [mcp.NAME] table)"),
                None => message.push_str(&format!(" (servers: {})", known.join(", "))),
            }
            return Err(Error::Usage(message));
        }
        Some(name) => vec![name],
        None => cfg.mcp.keys().collect(),
    };
    Secrets::from_config(&cfg);
    // A server without a `cwd` starts where the first HEARTBEAT.md is, as in a run.
    let workdir = cfg
        .files
        .first()
        .and_then(|f| f.parent())
        .unwrap_or(&ctx.cwd)
        .to_path_buf();
    let mut servers = Servers::new(&cfg);
    let mut listed = Vec::new();
    let mut failed = 0;
    for name in names {
        let result = servers.list(name, Path::new(&workdir));
        failed += usize::from(result.is_err());
        listed.push((name, result));
    }
    servers.stop_all();

    let mut out = ctx.out();
    if args.json {
        let servers: Vec<Value> = listed
            .iter()
            .map(|(name, result)| match result {
                Ok(tools) => json!({
                    "server": name,
                    "error": null,
                    "tools": tools.iter().map(|t| json!({
                        "name": t.name,
                        "task": format!("@{name}.{}", t.name),
                        "description": t.description,
                        "read_only": t.read_only,
                        "input_schema": t.input_schema,
                    })).collect::<Vec<_>>(),
                }),
                Err(why) => json!({"server": name, "error": why, "tools": []}),
            })
            .collect();
        out.json(&json!({ "servers": servers }));
    } else if listed.is_empty() {
        out.line("no MCP servers configured (add an [mcp.NAME] table: see README, MCP tools)");
    } else {
        for (name, result) in &listed {
            match result {
                Ok(tools) => {
                    out.line(&format!("{name}: {} tool(s)", tools.len()));
                    for t in tools {
                        let read_only = if t.read_only { "  (read-only)" } else { "" };
                        out.line(&format!("  @{name}.{}{read_only}", t.name));
                        if let Some(d) = t
                            .description
                            .as_deref()
                            .map(|d| Secrets::taken().redact(d).first_line(100))
                            && !d.is_empty()
                        {
                            out.line(&format!("      {d}"));
                        }
                        if let Some(p) = parameters(&t.input_schema) {
                            out.line(&format!("      parameters: {p}"));
                        }
                    }
                }
                Err(why) => out.line(&format!("{name}: {why}")),
            }
        }
    }
    drop(out);
    Ok(if failed > 0 {
        exit::TASK_FAILED
    } else {
        exit::OK
    })
}

/// A tool's parameters as a person reads them from its input schema: `name (type,
/// required), …`, in the schema's order; None when it takes none.
fn parameters(schema: &Value) -> Option<String> {
    let properties = schema.get("properties")?.as_object()?;
    if properties.is_empty() {
        return None;
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let shown: Vec<String> = properties
        .iter()
        .map(|(name, p)| {
            let kind = match p.get("type") {
                Some(Value::String(t)) => t.clone(),
                Some(Value::Array(ts)) => ts
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("|"),
                _ => "any".into(),
            };
            let req = if required.contains(&name.as_str()) {
                ", required"
            } else {
                ""
            };
            format!("{} ({kind}{req})", crate::text::clean(name))
        })
        .collect();
    Some(shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_read_as_name_type_and_required() {
        let schema = json!({
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "count": {"type": ["integer", "null"]},
                "opts": {}
            },
            "required": ["text"]
        });
        assert_eq!(
            parameters(&schema).as_deref(),
            Some("text (string, required), count (integer|null), opts (any)")
        );
        assert_eq!(parameters(&json!({"type": "object"})), None);
        assert_eq!(
            parameters(&json!({"type": "object", "properties": {}})),
            None
        );
    }
}
