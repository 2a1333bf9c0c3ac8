//! The resource section: a tree of RFC 14 vertices, and the version 1 shapes.

use serde_json::{Map, Value};

use super::error::{JobspecError, index, join};
use crate::idset::IdSet;

/// What a resource vertex asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ResourceType {
    /// A node.
    Node,
    /// A task slot (RFC 14 reserves the name).
    Slot,
    /// A core.
    Core,
    /// A GPU.
    Gpu,
    /// Any other type (socket, memory, ssd, rack, ...).
    Other(String),
}

impl ResourceType {
    /// The type as written in jobspec.
    pub fn as_str(&self) -> &str {
        match self {
            ResourceType::Node => "node",
            ResourceType::Slot => "slot",
            ResourceType::Core => "core",
            ResourceType::Gpu => "gpu",
            ResourceType::Other(s) => s,
        }
    }

    fn from_name(s: &str) -> Self {
        match s {
            "node" => ResourceType::Node,
            "slot" => ResourceType::Slot,
            "core" => ResourceType::Core,
            "gpu" => ResourceType::Gpu,
            other => ResourceType::Other(other.to_string()),
        }
    }
}

/// How a range count grows from `min` towards `max` (RFC 14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountOperator {
    /// `+`: min, min+operand, ...
    Add,
    /// `*`: min, min*operand, ...
    Multiply,
    /// `^`: min, min^operand, ...
    Power,
}

impl CountOperator {
    /// The operator character.
    pub fn as_char(self) -> char {
        match self {
            CountOperator::Add => '+',
            CountOperator::Multiply => '*',
            CountOperator::Power => '^',
        }
    }
}

/// A range count: `{min, max?, operator?, operand?}` or its string form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountRange {
    /// Smallest acceptable count (>= 1).
    pub min: u64,
    /// Largest acceptable count; `None` = as many as possible.
    pub max: Option<u64>,
    /// How counts step from `min`.
    pub operator: CountOperator,
    /// The step.
    pub operand: u64,
}

/// A vertex count (RFC 14): fixed, a range, or a set of acceptable values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Count {
    /// Exactly this many.
    Fixed(u64),
    /// Anything in the range.
    Range(CountRange),
    /// Any value of an RFC 22 idset, e.g. `"4,9,16,25"`.
    Set(IdSet),
}

impl Count {
    /// The fixed value, if the count is a plain integer.
    pub fn fixed(&self) -> Option<u64> {
        match self {
            Count::Fixed(n) => Some(*n),
            _ => None,
        }
    }
}

/// One resource vertex (RFC 14).
#[derive(Debug, Clone, PartialEq)]
pub struct Vertex {
    /// The resource type.
    pub kind: ResourceType,
    /// How many.
    pub count: Count,
    /// Unit of the count (e.g. `GB`).
    pub unit: Option<String>,
    /// Exclusive allocation requested explicitly (`None` = default).
    pub exclusive: Option<bool>,
    /// Label (required on slots: tasks name it).
    pub label: Option<String>,
    /// Restrict to resources with this id.
    pub id: Option<String>,
    /// Children.
    pub with: Vec<Vertex>,
}

/// Parse and check the `resources` list (RFC 14 rules, as flux-core's
/// Python `Jobspec` checks them). Depth is already bounded by the caller.
pub(crate) fn parse_resources(v: &Value) -> Result<Vec<Vertex>, JobspecError> {
    let list = v
        .as_array()
        .ok_or_else(|| JobspecError::wrong_type("resources", "an array", v))?;
    list.iter()
        .enumerate()
        .map(|(i, r)| parse_vertex(r, &index("resources", i)))
        .collect()
}

fn parse_vertex(v: &Value, path: &str) -> Result<Vertex, JobspecError> {
    let obj = v
        .as_object()
        .ok_or_else(|| JobspecError::wrong_type(path, "an object (a resource vertex)", v))?;
    let kind = match obj.get("type") {
        None => return Err(JobspecError::missing(&join(path, "type"))),
        Some(Value::String(s)) => ResourceType::from_name(s),
        Some(other) => {
            return Err(JobspecError::wrong_type(
                &join(path, "type"),
                "a string",
                other,
            ));
        }
    };
    let count_path = join(path, "count");
    let count = match obj.get("count") {
        None => return Err(JobspecError::missing(&count_path)),
        Some(c) => parse_count(c, &kind, &count_path)?,
    };
    let unit = opt_string(obj, path, "unit")?;
    let label = opt_string(obj, path, "label")?;
    let id = opt_string(obj, path, "id")?;
    let exclusive = match obj.get("exclusive") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            return Err(JobspecError::wrong_type(
                &join(path, "exclusive"),
                "true or false",
                other,
            ));
        }
    };
    if kind == ResourceType::Slot && label.is_none() {
        return Err(JobspecError::invalid(
            &join(path, "label"),
            "a slot must have a label (tasks refer to it)",
        ));
    }
    let with_path = join(path, "with");
    let with = match obj.get("with") {
        None => Vec::new(),
        Some(Value::Array(children)) => children
            .iter()
            .enumerate()
            .map(|(i, c)| parse_vertex(c, &index(&with_path, i)))
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(JobspecError::wrong_type(&with_path, "an array", other)),
    };
    Ok(Vertex {
        kind,
        count,
        unit,
        exclusive,
        label,
        id,
        with,
    })
}

fn opt_string(
    obj: &Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<Option<String>, JobspecError> {
    match obj.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(JobspecError::wrong_type(
            &join(path, key),
            "a string",
            other,
        )),
    }
}

fn parse_count(v: &Value, kind: &ResourceType, path: &str) -> Result<Count, JobspecError> {
    match v {
        Value::Object(o) => parse_count_object(o, path).map(Count::Range),
        Value::String(s) => parse_count_string(s, path),
        Value::Number(n) => {
            let Some(n) = n.as_i64() else {
                return Err(JobspecError::wrong_type(path, "an integer", v));
            };
            // flux-core: node, slot and core need at least one; other
            // types (e.g. gpu) may ask for zero.
            let needs_one = matches!(
                kind,
                ResourceType::Node | ResourceType::Slot | ResourceType::Core
            );
            if needs_one && n < 1 {
                return Err(JobspecError::invalid(
                    path,
                    format!("{} count must be at least 1, got {n}", kind.as_str()),
                ));
            }
            u64::try_from(n).map(Count::Fixed).map_err(|_| {
                JobspecError::invalid(path, format!("count must not be negative, got {n}"))
            })
        }
        other => Err(JobspecError::wrong_type(
            path,
            "an integer, a count string or a {min,max,operator,operand} object",
            other,
        )),
    }
}

fn parse_count_object(o: &Map<String, Value>, path: &str) -> Result<CountRange, JobspecError> {
    for key in o.keys() {
        if !matches!(key.as_str(), "min" | "max" | "operator" | "operand") {
            return Err(JobspecError::unknown_key(&join(path, key)));
        }
    }
    let int_field = |key: &str| -> Result<Option<u64>, JobspecError> {
        let p = join(path, key);
        match o.get(key) {
            None => Ok(None),
            Some(v) => match v.as_i64() {
                Some(n) if n >= 1 => Ok(Some(n as u64)),
                Some(n) => Err(JobspecError::invalid(
                    &p,
                    format!("must be at least 1, got {n}"),
                )),
                None => Err(JobspecError::wrong_type(&p, "an integer", v)),
            },
        }
    };
    let min = int_field("min")?.ok_or_else(|| JobspecError::missing(&join(path, "min")))?;
    let max = int_field("max")?;
    let operand = int_field("operand")?;
    let operator = match o.get("operator") {
        None => None,
        Some(Value::String(s)) => Some(operator_from_str(s, &join(path, "operator"))?),
        Some(other) => {
            return Err(JobspecError::wrong_type(
                &join(path, "operator"),
                "one of \"+\", \"*\", \"^\"",
                other,
            ));
        }
    };
    check_range(min, max, operator, operand, path)
}

fn operator_from_str(s: &str, path: &str) -> Result<CountOperator, JobspecError> {
    match s {
        "+" => Ok(CountOperator::Add),
        "*" => Ok(CountOperator::Multiply),
        "^" => Ok(CountOperator::Power),
        _ => Err(JobspecError::invalid(
            path,
            format!("operator must be one of \"+\", \"*\", \"^\", got {s:?}"),
        )),
    }
}

fn check_range(
    min: u64,
    max: Option<u64>,
    operator: Option<CountOperator>,
    operand: Option<u64>,
    path: &str,
) -> Result<CountRange, JobspecError> {
    if let Some(max) = max
        && max < min
    {
        return Err(JobspecError::invalid(
            &join(path, "max"),
            format!("max ({max}) must not be less than min ({min})"),
        ));
    }
    let (operator, operand) = match (operator, operand) {
        (None, None) => (CountOperator::Add, 1),
        (Some(op), Some(n)) => (op, n),
        _ => {
            return Err(JobspecError::invalid(
                path,
                "operator and operand must be given together",
            ));
        }
    };
    if matches!(operator, CountOperator::Multiply | CountOperator::Power) && operand < 2 {
        return Err(JobspecError::invalid(
            &join(path, "operand"),
            format!(
                "operand must be at least 2 with operator '{}'",
                operator.as_char()
            ),
        ));
    }
    if operator == CountOperator::Power && min < 2 {
        return Err(JobspecError::invalid(
            &join(path, "min"),
            "min must be at least 2 with operator '^'",
        ));
    }
    Ok(CountRange {
        min,
        max,
        operator,
        operand,
    })
}

/// A count string is an RFC 22 idset (`"4,9,16,25"`) or a range
/// `MIN+`, `MIN-MAX`, with `:OPERAND[:OPERATOR]` (flux-core's reading).
fn parse_count_string(s: &str, path: &str) -> Result<Count, JobspecError> {
    if let Ok(set) = IdSet::parse(s)
        && !set.is_empty()
    {
        return Ok(Count::Set(set));
    }
    let bad = || {
        JobspecError::invalid(
            path,
            format!(
                "count string {s:?} is neither an idset nor a range such as \"2+\" or \"2-32:2:*\""
            ),
        )
    };
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() > 3 {
        return Err(bad());
    }
    let num = |t: &str| t.parse::<u64>().map_err(|_| bad());
    let (min, max) = if let Some(min) = parts[0].strip_suffix('+') {
        (num(min)?, None)
    } else if let Some((lo, hi)) = parts[0].split_once('-') {
        (num(lo)?, Some(num(hi)?))
    } else {
        return Err(bad());
    };
    if min < 1 || max == Some(0) {
        return Err(JobspecError::invalid(
            path,
            format!("count string {s:?}: min and max must be at least 1"),
        ));
    }
    let operand = parts.get(1).map(|t| num(t)).transpose()?;
    let operator = match parts.get(2) {
        Some(op) => Some(operator_from_str(op, path)?),
        None => operand.map(|_| CountOperator::Add),
    };
    check_range(min, max, operator, operand, path).map(Count::Range)
}

/// The version 1 resource shape, read from a vertex list that already
/// passed RFC 14 checks and raw JSON (for the extra-key rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct V1Shape {
    pub nnodes: u64,
    pub node_exclusive: bool,
    pub slots_per_node: u64,
    pub slot_exclusive: bool,
    pub cores_per_slot: u64,
    pub gpus_per_slot: u64,
}

/// Check the RFC 25 shapes (`slot>core[,gpu]` or `node>slot>core[,gpu]`),
/// with the keys flux-core's C checker allows on each vertex.
pub(crate) fn v1_shape(raw: &Value, tree: &[Vertex]) -> Result<V1Shape, JobspecError> {
    let list = raw.as_array().map(Vec::as_slice).unwrap_or_default();
    if tree.len() != 1 || list.len() != 1 {
        return Err(JobspecError::not_v1(
            "resources",
            format!(
                "must hold exactly one vertex (node or slot), got {}",
                tree.len()
            ),
        ));
    }
    let top = &tree[0];
    let path = "resources[0]";
    match top.kind {
        ResourceType::Node => {
            // RFC 25 lists exclusive on node; flux-core's C checker omits it
            // but `flux run -N` writes it, so it is accepted.
            check_keys(
                &list[0],
                path,
                &["type", "count", "with", "unit", "exclusive"],
            )?;
            let nnodes = fixed_count(top, path, 1)?;
            let with_path = join(path, "with");
            if top.with.len() != 1 {
                return Err(JobspecError::not_v1(
                    &with_path,
                    format!(
                        "a node must hold exactly one slot, got {} children",
                        top.with.len()
                    ),
                ));
            }
            let slot_raw = &list[0]["with"][0];
            let slot_path = index(&with_path, 0);
            if top.with[0].kind != ResourceType::Slot {
                return Err(JobspecError::not_v1(
                    &join(&slot_path, "type"),
                    format!(
                        "a node must hold a slot, got {:?}",
                        top.with[0].kind.as_str()
                    ),
                ));
            }
            let slot = slot_shape(slot_raw, &top.with[0], &slot_path)?;
            Ok(V1Shape {
                nnodes,
                node_exclusive: top.exclusive.unwrap_or(false),
                ..slot
            })
        }
        ResourceType::Slot => slot_shape(&list[0], top, path),
        _ => Err(JobspecError::not_v1(
            &join(path, "type"),
            format!(
                "the top vertex must be node or slot, got {:?}",
                top.kind.as_str()
            ),
        )),
    }
}

fn slot_shape(raw: &Value, slot: &Vertex, path: &str) -> Result<V1Shape, JobspecError> {
    check_keys(raw, path, &["type", "count", "with", "label", "exclusive"])?;
    let nslots = fixed_count(slot, path, 1)?;
    let with_path = join(path, "with");
    if raw.get("with").is_none_or(|w| !w.is_array()) {
        return Err(JobspecError::not_v1(
            &with_path,
            "a slot must hold a core list",
        ));
    }
    let (mut cores, mut gpus) = (None, None);
    for (i, child) in slot.with.iter().enumerate() {
        let child_path = index(&with_path, i);
        check_keys(&raw["with"][i], &child_path, &["type", "count"])?;
        match child.kind {
            ResourceType::Core if cores.is_none() => {
                cores = Some(fixed_count(child, &child_path, 1)?)
            }
            ResourceType::Gpu if gpus.is_none() => gpus = Some(fixed_count(child, &child_path, 0)?),
            ResourceType::Core | ResourceType::Gpu => {
                return Err(JobspecError::not_v1(
                    &join(&child_path, "type"),
                    format!("a slot may hold only one {} vertex", child.kind.as_str()),
                ));
            }
            _ => {
                return Err(JobspecError::not_v1(
                    &join(&child_path, "type"),
                    format!(
                        "a slot may hold only core and gpu, got {:?}",
                        child.kind.as_str()
                    ),
                ));
            }
        }
    }
    let cores_per_slot =
        cores.ok_or_else(|| JobspecError::not_v1(&with_path, "a slot must hold a core vertex"))?;
    Ok(V1Shape {
        nnodes: 0,
        node_exclusive: false,
        slots_per_node: nslots,
        slot_exclusive: slot.exclusive.unwrap_or(false),
        cores_per_slot,
        gpus_per_slot: gpus.unwrap_or(0),
    })
}

fn fixed_count(v: &Vertex, path: &str, min: u64) -> Result<u64, JobspecError> {
    let count_path = join(path, "count");
    match v.count {
        Count::Fixed(n) if n >= min => Ok(n),
        Count::Fixed(n) => Err(JobspecError::not_v1(
            &count_path,
            format!("{} count must be at least {min}, got {n}", v.kind.as_str()),
        )),
        _ => Err(JobspecError::not_v1(
            &count_path,
            "counts must be plain integers",
        )),
    }
}

fn check_keys(raw: &Value, path: &str, allowed: &[&str]) -> Result<(), JobspecError> {
    if let Some(obj) = raw.as_object() {
        for key in obj.keys() {
            if !allowed.contains(&key.as_str()) {
                return Err(JobspecError::not_v1(
                    &join(path, key),
                    format!(
                        "key not allowed on this vertex (allowed: {})",
                        allowed.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(())
}
