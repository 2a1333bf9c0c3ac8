//! The job shell's `{{tag}}` templates in a job's command arguments, as
//! flux-shell(1) renders them: `{{id}}` (and `{{id.ENCODING}}`, `{{jobid}}`),
//! `{{name}}`, `{{nnodes}}`, `{{size}}`/`{{ntasks}}`, `{{task.id}}`/`{{taskid}}`
//! /`{{task.rank}}`, `{{task.index}}`/`{{task.localid}}`, `{{node.id}}`/
//! `{{node.rank}}`, `{{node.name}}`, `{{node.ncores}}`, `{{node.cores}}`,
//! `{{node.gpus}}` and `{{tmpdir}}`. A tag it does not know is left as
//! written, as flux leaves it.

use std::str::FromStr;

use crate::jobid::{Encoding, JobId};

/// What the tags of one task's templates stand for.
#[derive(Debug, Clone, Default)]
pub struct Tags<'a> {
    /// The job.
    pub id: JobId,
    /// The job's name (flux's: the jobspec's, else the command's base name).
    pub name: &'a str,
    /// Nodes (shell ranks) of the job.
    pub nnodes: u32,
    /// Tasks of the whole job.
    pub ntasks: u32,
    /// The task's global rank.
    pub task_rank: u32,
    /// The task's index among its node's tasks.
    pub task_index: u32,
    /// The node's shell rank.
    pub node_rank: u32,
    /// The node's host name.
    pub node_name: &'a str,
    /// The node's cores in the job, as an idset, and their count.
    pub node_cores: &'a str,
    /// How many cores the job has on the node.
    pub node_ncores: u32,
    /// The node's GPUs in the job, as an idset.
    pub node_gpus: &'a str,
    /// The job's temporary directory on the node, once it is made.
    pub tmpdir: Option<&'a str>,
    /// F58 ids with `f`, not `ƒ` (the job sets `FLUX_F58_FORCE_ASCII`).
    pub ascii_f58: bool,
}

/// True when `s` may hold a tag: the cheap test before [`render`].
pub fn has_tags(s: &str) -> bool {
    s.contains("{{")
}

/// `template` with every tag [`Tags`] knows replaced.
pub fn render(template: &str, tags: &Tags<'_>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            out.push_str(&rest[open..]);
            return out;
        };
        let name = &after[..close];
        match value(name.trim(), tags) {
            Some(v) => out.push_str(&v),
            None => {
                out.push_str("{{");
                out.push_str(name);
                out.push_str("}}");
            }
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

/// The text a tag stands for, `None` when it is not one of flux's.
fn value(name: &str, t: &Tags<'_>) -> Option<String> {
    // flux's synonyms: `jobid*` is `id*`, `taskid` is `task.id`.
    let name = name
        .strip_prefix("job")
        .filter(|n| n.starts_with("id"))
        .unwrap_or(name);
    let name = if name == "taskid" { "task.id" } else { name };
    if let Some(enc) = name.strip_prefix("id") {
        let enc = match enc {
            "" => Encoding::F58,
            _ => Encoding::from_str(enc.strip_prefix('.')?).ok()?,
        };
        return Some(match enc {
            Encoding::F58 if t.ascii_f58 => t.id.to_f58_ascii(),
            _ => t.id.encode(enc),
        });
    }
    Some(match name {
        "name" => t.name.to_string(),
        "nnodes" => t.nnodes.to_string(),
        "size" | "ntasks" => t.ntasks.to_string(),
        "task.id" | "task.rank" => t.task_rank.to_string(),
        "task.index" | "task.localid" => t.task_index.to_string(),
        "node.id" | "node.rank" => t.node_rank.to_string(),
        "node.name" => t.node_name.to_string(),
        "node.cores" | "node.resources.cores" => t.node_cores.to_string(),
        "node.ncores" | "node.resources.ncores" => t.node_ncores.to_string(),
        "node.gpus" | "node.resources.gpus" => t.node_gpus.to_string(),
        "tmpdir" => t.tmpdir?.to_string(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags() -> Tags<'static> {
        Tags {
            id: JobId::from(1234567u64),
            name: "hello",
            nnodes: 2,
            ntasks: 8,
            task_rank: 5,
            task_index: 1,
            node_rank: 1,
            node_name: "node2",
            node_cores: "0-3",
            node_ncores: 4,
            node_gpus: "",
            tmpdir: Some("/tmp/jobtmp-1-x"),
            ascii_f58: false,
        }
    }

    #[test]
    fn every_tag_flux_knows() {
        let t = tags();
        let id = JobId::from(1234567u64);
        let cases = [
            ("{{id}}", id.to_f58()),
            ("{{jobid}}", id.to_f58()),
            ("{{id.dec}}", "1234567".to_string()),
            ("{{jobid.hex}}", id.to_hex()),
            ("{{id.f58}}", id.to_f58()),
            ("{{name}}", "hello".into()),
            ("{{nnodes}}", "2".into()),
            ("{{size}}/{{ntasks}}", "8/8".into()),
            ("{{task.id}}{{taskid}}{{task.rank}}", "555".into()),
            ("{{task.index}}{{task.localid}}", "11".into()),
            ("{{node.id}}:{{node.name}}", "1:node2".into()),
            ("{{node.cores}} {{node.ncores}}", "0-3 4".into()),
            ("{{tmpdir}}/script", "/tmp/jobtmp-1-x/script".into()),
        ];
        for (template, want) in cases {
            assert_eq!(render(template, &t), want, "{template}");
        }
    }

    #[test]
    fn unknown_and_unclosed_tags_stay_as_written() {
        let t = tags();
        assert_eq!(render("{{nope}}-{{id.bogus}}", &t), "{{nope}}-{{id.bogus}}");
        assert_eq!(render("a {{name", &t), "a {{name");
        assert_eq!(render("{{ name }}", &t), "hello");
        assert_eq!(render("plain", &t), "plain");
        let none = Tags {
            tmpdir: None,
            ..tags()
        };
        assert_eq!(render("{{tmpdir}}", &none), "{{tmpdir}}");
        let ascii = Tags {
            ascii_f58: true,
            ..tags()
        };
        let id = JobId::from(1234567u64);
        assert_eq!(
            render("{{id}} {{id.f58}}", &ascii),
            format!("{0} {0}", id.to_f58_ascii())
        );
    }
}
