//! A pipeline as text (one module per line with its gates) and as DOT.

use std::fmt::Write as _;

use crate::build::Rendered;
use crate::module::{Module, ModuleKind};

fn describe(m: &Module) -> String {
    match &m.kind {
        ModuleKind::IngressPort { port } => format!("ingress_port {port}"),
        ModuleKind::EgressPort { port } => format!("egress_port {port}"),
        ModuleKind::Acl { rules } => format!("acl {} rules", rules.len()),
        ModuleKind::L2Switch { fib } => format!("l2_switch fib {}", fib.len()),
        ModuleKind::L3Router { fib } => format!("l3_router fib {}", fib.len()),
    }
}

/// The pipeline of `port` as text: each member module, its function and
/// tables, and its egress gates; `None` for an unknown port.
pub fn pipeline_text(r: &Rendered, port: &str) -> Option<String> {
    let p = r.pipelines.get(port)?;
    let mut out = format!("pipeline {} (network {})\n", p.port, p.network);
    for id in &p.modules {
        let Some(m) = r.modules.get(id) else { continue };
        let _ = writeln!(out, "  {id}: {}", describe(m));
        for (g, next) in &m.egress {
            let _ = writeln!(out, "    gate {g} -> {next}");
        }
        match &m.kind {
            ModuleKind::L2Switch { fib } => {
                for (mac, g) in fib {
                    let _ = writeln!(out, "    fib {mac} -> gate {g}");
                }
            }
            ModuleKind::L3Router { fib } => {
                for (ip, g) in fib {
                    let _ = writeln!(out, "    fib {ip} -> gate {g}");
                }
            }
            _ => {}
        }
    }
    Some(out)
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The pipeline of `port` as a Graphviz DOT digraph; `None` for an unknown port.
pub fn pipeline_dot(r: &Rendered, port: &str) -> Option<String> {
    let p = r.pipelines.get(port)?;
    let mut out = format!("digraph {} {{\n  rankdir=LR;\n", quote(&p.port));
    for id in &p.modules {
        let Some(m) = r.modules.get(id) else { continue };
        let shape = match m.kind {
            ModuleKind::IngressPort { .. } | ModuleKind::EgressPort { .. } => "ellipse",
            _ => "box",
        };
        let _ = writeln!(
            out,
            "  {} [shape={shape}, label={}];",
            quote(id),
            quote(&format!("{id}\\n{}", describe(m)))
        );
    }
    for id in &p.modules {
        let Some(m) = r.modules.get(id) else { continue };
        for (g, next) in &m.egress {
            let _ = writeln!(out, "  {} -> {} [label=\"{g}\"];", quote(id), quote(next));
        }
    }
    out.push_str("}\n");
    Some(out)
}
