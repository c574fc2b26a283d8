//! Blazar's resource filter language (`hypervisor_properties`, `resource_properties`), typed and
//! validated.
//!
//! A lease carries each filter as JSON encoded in a string, for example
//! `["and", [">=", "$memory_mb", "65536"], ["==", "$gpu", "true"]]`; an empty string or `[]`
//! means no filter. Blazar itself supports only `and` and compares everything as strings; berth
//! accepts a larger grammar:
//!
//! - `[op, "$key", value]` with `op` one of `==` (or its alias `=`), `!=`, `<`, `<=`, `>`, `>=`
//!   and `value` a JSON string, number or boolean;
//! - `["in", "$key", v1, v2, ...]` or `["in", "$key", [v1, v2, ...]]` (at least one value);
//! - `["and", clause, ...]` and `["or", clause, ...]` (at least one clause) and
//!   `["not", clause]`, nested at most [`FILTER_DEPTH_MAX`] levels and at most [`FILTER_NODES_MAX`]
//!   nodes in all.
//!
//! Operators are case-sensitive. A key is a string `$name` with a non-empty name; the filter
//! keeps the name without the `$`.
//!
//! # Comparing
//!
//! A comparison is numeric when the host's value is a number or a string that parses as a
//! finite number and the filter's value is too (so `"10" > "9"`). Otherwise it is boolean when
//! both sides are booleans or the strings `true`/`false` in any case; booleans support only
//! `==`, `!=` and `in` (an ordering operator with a boolean literal is refused when parsed, and is
//! false when the boolean comes from strings). Otherwise both sides are compared as strings,
//! ordering lexicographically by code point.
//!
//! A host that lacks the property matches no comparison except `!=` (a missing value differs
//! from everything) and no `in`; `not` inverts whatever its clause gives, so
//! `["not", ["==", "$gpu", "true"]]` matches a host without `gpu`.

use crate::limits::{FILTER_DEPTH_MAX, FILTER_NODES_MAX};
use crate::model::provider::AttrValue;
use serde_json::Value;
use std::borrow::Cow;
use std::cmp::Ordering;

/// The longest excerpt of the filter an error message quotes, in characters.
const SNIPPET_CHARS: usize = 80;

/// A parsed filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// No filter: every host matches.
    All,
    /// `[op, "$key", value]`.
    Compare {
        /// The operator.
        op: Op,
        /// The property name, without the `$`.
        key: String,
        /// The value, as given.
        value: Literal,
    },
    /// `["in", "$key", v1, v2, ...]`: the property equals one of the values.
    In {
        /// The property name, without the `$`.
        key: String,
        /// The values, as given (never empty when parsed).
        values: Vec<Literal>,
    },
    /// Every clause matches (`and`).
    And(Vec<Filter>),
    /// At least one clause matches (`or`).
    Or(Vec<Filter>),
    /// The clause does not match (`not`).
    Not(Box<Filter>),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `==` (also written `=`).
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

/// A value as the filter gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// A JSON string (which may still compare as a number or a boolean).
    String(String),
    /// A JSON number.
    Number(f64),
    /// A JSON boolean.
    Bool(bool),
}

/// Why a filter was refused. The message names the offending part; [`FilterError::in_field`]
/// adds the name of the lease field for a 400 answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FilterError {
    /// Not JSON, or JSON not of the grammar's shape.
    #[error("malformed filter: {detail}")]
    Malformed {
        /// What is wrong and where.
        detail: String,
    },
    /// The operator is not one berth knows.
    #[error("unknown operator \"{op}\"")]
    UnknownOperator {
        /// The operator as given.
        op: String,
    },
    /// The key is not a string `$name`.
    #[error("bad property key {key}: a key is a string \"$name\"")]
    BadKey {
        /// The key as JSON text (a string key appears in quotes).
        key: String,
    },
    /// The property is not one the caller knows.
    #[error("property \"${name}\" is not known")]
    UnknownProperty {
        /// The property name, without the `$`.
        name: String,
    },
    /// The filter is nested too deep or has too many nodes.
    #[error("filter too complex: {detail}")]
    TooComplex {
        /// Which bound was passed.
        detail: String,
    },
    /// The operator cannot apply to the value's type.
    #[error("type mismatch: {detail}")]
    TypeMismatch {
        /// What is wrong and where.
        detail: String,
    },
}

impl FilterError {
    /// The message with the field it came from, for example
    /// `unknown operator "like" in resource_properties`.
    pub fn in_field(&self, field: &str) -> String {
        format!("{self} in {field}")
    }
}

impl Op {
    /// Reads an operator; `=` is `==`.
    pub fn from_symbol(symbol: &str) -> Option<Op> {
        Some(match symbol {
            "==" | "=" => Op::Eq,
            "!=" => Op::Ne,
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            _ => return None,
        })
    }

    /// The canonical symbol (`==` for [`Op::Eq`]).
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }

    /// Whether the operator orders (`<`, `<=`, `>`, `>=`).
    pub fn is_ordering(self) -> bool {
        matches!(self, Op::Lt | Op::Le | Op::Gt | Op::Ge)
    }

    fn holds(self, ordering: Ordering) -> bool {
        match self {
            Op::Eq => ordering.is_eq(),
            Op::Ne => ordering.is_ne(),
            Op::Lt => ordering.is_lt(),
            Op::Le => ordering.is_le(),
            Op::Gt => ordering.is_gt(),
            Op::Ge => ordering.is_ge(),
        }
    }
}

impl Literal {
    /// The value as JSON; a non-finite number (which parsing never produces) becomes `null`.
    pub fn to_json(&self) -> Value {
        match self {
            Literal::String(s) => Value::String(s.clone()),
            Literal::Number(n) => {
                serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number)
            }
            Literal::Bool(b) => Value::Bool(*b),
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            Literal::String(s) => numeric(s),
            Literal::Number(n) => Some(*n),
            Literal::Bool(_) => None,
        }
    }

    fn boolean(&self) -> Option<bool> {
        match self {
            Literal::String(s) => boolean(s),
            Literal::Number(_) => None,
            Literal::Bool(b) => Some(*b),
        }
    }

    fn text(&self) -> Cow<'_, str> {
        match self {
            Literal::String(s) => Cow::Borrowed(s),
            Literal::Number(n) => Cow::Owned(n.to_string()),
            Literal::Bool(b) => Cow::Owned(b.to_string()),
        }
    }
}

impl Filter {
    /// Parses Blazar's string form. `""`, `"[]"` and whitespace-only mean [`Filter::All`].
    pub fn parse(text: &str) -> Result<Filter, FilterError> {
        if text.trim().is_empty() {
            return Ok(Filter::All);
        }
        let value: Value = serde_json::from_str(text).map_err(|e| FilterError::Malformed {
            detail: format!("not valid JSON: {e}"),
        })?;
        Filter::from_json(&value)
    }

    /// Parses an already-decoded JSON value (the same grammar). `[]` and a blank JSON string
    /// mean [`Filter::All`]; any other value that is not an array is refused.
    pub fn from_json(value: &Value) -> Result<Filter, FilterError> {
        match value {
            Value::Array(items) if items.is_empty() => Ok(Filter::All),
            Value::Array(_) => Parser { nodes: 0 }.clause(value, 1),
            Value::String(s) if s.trim().is_empty() => Ok(Filter::All),
            other => Err(malformed(format!(
                "a filter is a JSON array, got {}",
                described(other)
            ))),
        }
    }

    /// The filter as JSON, in the grammar [`Filter::parse`] reads: `=` comes back as `==` and
    /// `in` in its spread form. [`Filter::All`] is `[]`, which parses only at the top.
    pub fn to_json(&self) -> Value {
        let mut items = Vec::new();
        match self {
            Filter::All => {}
            Filter::Compare { op, key, value } => {
                items.push(Value::from(op.symbol()));
                items.push(Value::String(format!("${key}")));
                items.push(value.to_json());
            }
            Filter::In { key, values } => {
                items.push(Value::from("in"));
                items.push(Value::String(format!("${key}")));
                items.extend(values.iter().map(Literal::to_json));
            }
            Filter::And(clauses) | Filter::Or(clauses) => {
                let op = if matches!(self, Filter::And(_)) {
                    "and"
                } else {
                    "or"
                };
                items.push(Value::from(op));
                items.extend(clauses.iter().map(Filter::to_json));
            }
            Filter::Not(clause) => {
                items.push(Value::from("not"));
                items.push(clause.to_json());
            }
        }
        Value::Array(items)
    }

    /// Property names referenced (without the `$`), sorted and deduplicated.
    pub fn properties(&self) -> Vec<&str> {
        let mut names = Vec::new();
        self.collect_properties(&mut names);
        names.sort_unstable();
        names.dedup();
        names
    }

    fn collect_properties<'a>(&'a self, names: &mut Vec<&'a str>) {
        match self {
            Filter::All => {}
            Filter::Compare { key, .. } | Filter::In { key, .. } => names.push(key),
            Filter::And(clauses) | Filter::Or(clauses) => {
                for clause in clauses {
                    clause.collect_properties(names);
                }
            }
            Filter::Not(clause) => clause.collect_properties(names),
        }
    }

    /// Checks every referenced property with `known` (given the name without the `$`);
    /// refuses with [`FilterError::UnknownProperty`] naming the first unknown one in sorted
    /// order.
    pub fn check_known(&self, known: impl Fn(&str) -> bool) -> Result<(), FilterError> {
        match self.properties().into_iter().find(|name| !known(name)) {
            Some(name) => Err(FilterError::UnknownProperty {
                name: name.to_owned(),
            }),
            None => Ok(()),
        }
    }

    /// Whether a host matches; `lookup` gives the host's value of a property (named without the
    /// `$`), or `None` when the host lacks it. See the module documentation for the rules.
    pub fn matches(&self, lookup: &dyn Fn(&str) -> Option<AttrValue>) -> bool {
        match self {
            Filter::All => true,
            Filter::Compare { op, key, value } => match lookup(key) {
                Some(host) => compare(&host, value).satisfies(*op),
                None => *op == Op::Ne,
            },
            Filter::In { key, values } => lookup(key).is_some_and(|host| {
                values
                    .iter()
                    .any(|value| compare(&host, value).satisfies(Op::Eq))
            }),
            Filter::And(clauses) => clauses.iter().all(|clause| clause.matches(lookup)),
            Filter::Or(clauses) => clauses.iter().any(|clause| clause.matches(lookup)),
            Filter::Not(clause) => !clause.matches(lookup),
        }
    }

    /// Conjunction of two filters (`hypervisor_properties` AND `resource_properties`):
    /// [`Filter::All`] disappears and the clauses of an [`Filter::And`] are flattened in.
    pub fn and(self, other: Filter) -> Filter {
        match (self, other) {
            (Filter::All, filter) | (filter, Filter::All) => filter,
            (Filter::And(mut left), Filter::And(right)) => {
                left.extend(right);
                Filter::And(left)
            }
            (Filter::And(mut left), right) => {
                left.push(right);
                Filter::And(left)
            }
            (left, Filter::And(right)) => {
                let mut clauses = Vec::with_capacity(right.len() + 1);
                clauses.push(left);
                clauses.extend(right);
                Filter::And(clauses)
            }
            (left, right) => Filter::And(vec![left, right]),
        }
    }
}

/// How a host's value relates to a literal.
enum Outcome {
    /// Numbers or strings, in order.
    Ordered(Ordering),
    /// Numbers that do not order (a NaN on the host): only `!=` holds.
    Unordered,
    /// Booleans: only `==` and `!=` apply.
    Booleans(bool, bool),
}

impl Outcome {
    fn satisfies(&self, op: Op) -> bool {
        match self {
            Outcome::Ordered(ordering) => op.holds(*ordering),
            Outcome::Unordered => op == Op::Ne,
            Outcome::Booleans(host, literal) => match op {
                Op::Eq => host == literal,
                Op::Ne => host != literal,
                _ => false,
            },
        }
    }
}

fn compare(host: &AttrValue, literal: &Literal) -> Outcome {
    let host_number = match host {
        AttrValue::String(s) => numeric(s),
        AttrValue::Number(n) => Some(*n),
        AttrValue::Bool(_) => None,
    };
    if let (Some(h), Some(l)) = (host_number, literal.number()) {
        return h
            .partial_cmp(&l)
            .map_or(Outcome::Unordered, Outcome::Ordered);
    }
    let host_bool = match host {
        AttrValue::String(s) => boolean(s),
        AttrValue::Number(_) => None,
        AttrValue::Bool(b) => Some(*b),
    };
    if let (Some(h), Some(l)) = (host_bool, literal.boolean()) {
        return Outcome::Booleans(h, l);
    }
    let host_text = match host {
        AttrValue::String(s) => Cow::Borrowed(s.as_str()),
        AttrValue::Number(n) => Cow::Owned(n.to_string()),
        AttrValue::Bool(b) => Cow::Owned(b.to_string()),
    };
    Outcome::Ordered(host_text.as_ref().cmp(literal.text().as_ref()))
}

/// A string's value as a finite number, surrounding whitespace ignored.
fn numeric(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|n| n.is_finite())
}

/// A string's value as a boolean: `true` or `false` in any case.
fn boolean(s: &str) -> Option<bool> {
    if s.eq_ignore_ascii_case("true") {
        Some(true)
    } else if s.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// A recursive-descent reader that counts the nodes it has accepted.
struct Parser {
    nodes: usize,
}

impl Parser {
    fn count(&mut self, nodes: usize) -> Result<(), FilterError> {
        self.nodes = self.nodes.saturating_add(nodes);
        if self.nodes > FILTER_NODES_MAX {
            return Err(FilterError::TooComplex {
                detail: format!("more than {FILTER_NODES_MAX} nodes"),
            });
        }
        Ok(())
    }

    fn clause(&mut self, value: &Value, depth: usize) -> Result<Filter, FilterError> {
        if depth > FILTER_DEPTH_MAX {
            return Err(FilterError::TooComplex {
                detail: format!("nested deeper than {FILTER_DEPTH_MAX} levels"),
            });
        }
        self.count(1)?;
        let Value::Array(items) = value else {
            return Err(malformed(format!(
                "a clause is a JSON array, got {}",
                described(value)
            )));
        };
        let Some((head, args)) = items.split_first() else {
            return Err(malformed("empty clause [] inside a filter".to_owned()));
        };
        let Value::String(op) = head else {
            return Err(malformed(format!(
                "an operator is a string, got {} in {}",
                snippet(head),
                snippet(value)
            )));
        };
        match op.as_str() {
            "" => Err(malformed(format!("empty operator in {}", snippet(value)))),
            "and" => Ok(Filter::And(self.clauses(op, args, value, depth)?)),
            "or" => Ok(Filter::Or(self.clauses(op, args, value, depth)?)),
            "not" => self.negation(args, value, depth),
            "in" => self.membership(args, value),
            _ => match Op::from_symbol(op) {
                Some(symbol) => comparison(symbol, op, args, value),
                None => Err(FilterError::UnknownOperator { op: op.clone() }),
            },
        }
    }

    fn clauses(
        &mut self,
        op: &str,
        args: &[Value],
        whole: &Value,
        depth: usize,
    ) -> Result<Vec<Filter>, FilterError> {
        if args.is_empty() {
            return Err(malformed(format!(
                "\"{op}\" needs at least one clause in {}",
                snippet(whole)
            )));
        }
        args.iter().map(|arg| self.clause(arg, depth + 1)).collect()
    }

    fn negation(
        &mut self,
        args: &[Value],
        whole: &Value,
        depth: usize,
    ) -> Result<Filter, FilterError> {
        let [inner] = args else {
            return Err(malformed(format!(
                "\"not\" takes exactly one clause, got {} in {}",
                args.len(),
                snippet(whole)
            )));
        };
        Ok(Filter::Not(Box::new(self.clause(inner, depth + 1)?)))
    }

    fn membership(&mut self, args: &[Value], whole: &Value) -> Result<Filter, FilterError> {
        let Some((key, rest)) = args.split_first() else {
            return Err(malformed(format!(
                "\"in\" takes a key and values in {}",
                snippet(whole)
            )));
        };
        let key = property_key(key)?;
        let listed = match rest {
            [Value::Array(list)] => list.as_slice(),
            _ => rest,
        };
        if listed.is_empty() {
            return Err(malformed(format!(
                "\"in\" needs at least one value in {}",
                snippet(whole)
            )));
        }
        self.count(listed.len())?;
        let values = listed
            .iter()
            .map(|value| literal(value, whole))
            .collect::<Result<_, _>>()?;
        Ok(Filter::In { key, values })
    }
}

/// `[op, "$key", value]`; `written` is the operator as given (`=` or `==`).
fn comparison(op: Op, written: &str, args: &[Value], whole: &Value) -> Result<Filter, FilterError> {
    let [key, value] = args else {
        return Err(malformed(format!(
            "\"{written}\" takes a key and one value, got {} argument(s) in {}",
            args.len(),
            snippet(whole)
        )));
    };
    let key = property_key(key)?;
    let value = literal(value, whole)?;
    if let (Literal::Bool(b), true) = (&value, op.is_ordering()) {
        return Err(FilterError::TypeMismatch {
            detail: format!(
                "\"{written}\" cannot order the boolean {b} in {}",
                snippet(whole)
            ),
        });
    }
    Ok(Filter::Compare { op, key, value })
}

fn property_key(value: &Value) -> Result<String, FilterError> {
    match value {
        Value::String(s) => match s.strip_prefix('$') {
            Some(name) if !name.is_empty() => Ok(name.to_owned()),
            _ => Err(FilterError::BadKey {
                key: snippet(value),
            }),
        },
        _ => Err(FilterError::BadKey {
            key: snippet(value),
        }),
    }
}

fn literal(value: &Value, whole: &Value) -> Result<Literal, FilterError> {
    match value {
        Value::String(s) => Ok(Literal::String(s.clone())),
        Value::Number(n) => n.as_f64().map(Literal::Number).ok_or_else(|| {
            malformed(format!(
                "the number {n} is out of range in {}",
                snippet(whole)
            ))
        }),
        Value::Bool(b) => Ok(Literal::Bool(*b)),
        Value::Null | Value::Array(_) | Value::Object(_) => Err(malformed(format!(
            "a value is a string, number or boolean, got {} in {}",
            described(value),
            snippet(whole)
        ))),
    }
}

fn malformed(detail: String) -> FilterError {
    FilterError::Malformed { detail }
}

/// The kind of a value and its text, for example `an object {"a":1}`.
fn described(value: &Value) -> String {
    let kind = match value {
        Value::Null => return "null".to_owned(),
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    format!("{kind} {}", snippet(value))
}

/// Compact JSON text of a value, cut to [`SNIPPET_CHARS`] characters.
fn snippet(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests;
