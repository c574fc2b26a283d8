//! Human filters, translated to berth's JSON filter language.
//!
//! `gpu == true and (size == large or cpu_ghz >= 3)` becomes
//! `["and", ["==", "$gpu", true], ["or", ["==", "$size", "large"], [">=", "$cpu_ghz", 3]]]`.
//! Comparisons are `KEY OP VALUE` with `==` (or `=`), `!=`, `<`, `<=`, `>`, `>=`, and
//! `KEY in (V1, V2)` (or `[V1, V2]`, and `not in`); they combine with `and` (`&&`), `or`
//! (`||`), `not` (`!`) and parentheses, `not` binding tightest and `or` loosest. Numbers and
//! `true`/`false` are sent typed; anything else, or any quoted value, as a string. A filter that
//! starts with `[` is already berth's JSON and is sent as it is.

use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open,
    Close,
    OpenList,
    CloseList,
    Comma,
    Op(&'static str),
    Not,
    And,
    Or,
    In,
    Word(String),
    Quoted(String),
}

/// Translates a filter (see the module documentation); an empty text is no filter (`None`).
pub(crate) fn translate(text: &str) -> Result<Option<Value>, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    if trimmed.starts_with('[') {
        return match serde_json::from_str::<Value>(trimmed) {
            Ok(value @ Value::Array(_)) => Ok(Some(value)),
            Ok(_) => Err(format!("{trimmed}: a JSON filter is a list")),
            Err(e) => Err(format!("{trimmed}: not a JSON filter: {e}")),
        };
    }
    let tokens = tokenize(trimmed)?;
    let mut parser = Parser {
        tokens: &tokens,
        at: 0,
    };
    let value = parser.or()?;
    match parser.peek() {
        None => Ok(Some(value)),
        Some(token) => Err(format!("{trimmed}: unexpected {}", describe(token))),
    }
}

/// Every clause together (`None` when there is none).
pub(crate) fn all(clauses: Vec<Value>) -> Option<Value> {
    match clauses.len() {
        0 => None,
        1 => clauses.into_iter().next(),
        _ => {
            let mut out = vec![json!("and")];
            out.extend(clauses);
            Some(Value::Array(out))
        }
    }
}

fn describe(token: &Token) -> String {
    match token {
        Token::Open => "(".to_owned(),
        Token::Close => ")".to_owned(),
        Token::OpenList => "[".to_owned(),
        Token::CloseList => "]".to_owned(),
        Token::Comma => ",".to_owned(),
        Token::Op(op) => (*op).to_owned(),
        Token::Not => "not".to_owned(),
        Token::And => "and".to_owned(),
        Token::Or => "or".to_owned(),
        Token::In => "in".to_owned(),
        Token::Word(word) => word.clone(),
        Token::Quoted(text) => format!("{text:?}"),
    }
}

const SPECIAL: &str = "()[],'\"=!<>&|";

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let ch = chars[at];
        let next = chars.get(at + 1).copied();
        let (token, width) = match (ch, next) {
            (c, _) if c.is_whitespace() => {
                at += 1;
                continue;
            }
            ('(', _) => (Token::Open, 1),
            (')', _) => (Token::Close, 1),
            ('[', _) => (Token::OpenList, 1),
            (']', _) => (Token::CloseList, 1),
            (',', _) => (Token::Comma, 1),
            ('=', Some('=')) => (Token::Op("=="), 2),
            ('=', _) => (Token::Op("=="), 1),
            ('!', Some('=')) => (Token::Op("!="), 2),
            ('!', _) => (Token::Not, 1),
            ('<', Some('=')) => (Token::Op("<="), 2),
            ('<', _) => (Token::Op("<"), 1),
            ('>', Some('=')) => (Token::Op(">="), 2),
            ('>', _) => (Token::Op(">"), 1),
            ('&', Some('&')) => (Token::And, 2),
            ('|', Some('|')) => (Token::Or, 2),
            ('\'' | '"', _) => {
                let end = chars[at + 1..]
                    .iter()
                    .position(|c| *c == ch)
                    .ok_or_else(|| format!("{text}: unterminated quote"))?;
                let quoted: String = chars[at + 1..at + 1 + end].iter().collect();
                (Token::Quoted(quoted), end + 2)
            }
            ('&' | '|', _) => return Err(format!("{text}: use && or ||, or and / or")),
            _ => {
                let len = chars[at..]
                    .iter()
                    .position(|c| c.is_whitespace() || SPECIAL.contains(*c))
                    .unwrap_or(chars.len() - at);
                let word: String = chars[at..at + len].iter().collect();
                let token = match word.to_ascii_lowercase().as_str() {
                    "and" => Token::And,
                    "or" => Token::Or,
                    "not" => Token::Not,
                    "in" => Token::In,
                    _ => Token::Word(word),
                };
                (token, len)
            }
        };
        tokens.push(token);
        at += width;
    }
    Ok(tokens)
}

struct Parser<'t> {
    tokens: &'t [Token],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn expect(&mut self, wanted: &Token, what: &str) -> Result<(), String> {
        match self.next() {
            Some(token) if token == *wanted => Ok(()),
            Some(token) => Err(format!("expected {what}, found {}", describe(&token))),
            None => Err(format!("expected {what} at the end")),
        }
    }

    /// `and` terms joined by `or`.
    fn or(&mut self) -> Result<Value, String> {
        let mut clauses = vec![self.and()?];
        while self.peek() == Some(&Token::Or) {
            self.at += 1;
            clauses.push(self.and()?);
        }
        Ok(join("or", clauses))
    }

    /// Unary terms joined by `and`.
    fn and(&mut self) -> Result<Value, String> {
        let mut clauses = vec![self.unary()?];
        while self.peek() == Some(&Token::And) {
            self.at += 1;
            clauses.push(self.unary()?);
        }
        Ok(join("and", clauses))
    }

    fn unary(&mut self) -> Result<Value, String> {
        match self.peek() {
            Some(Token::Not) => {
                self.at += 1;
                Ok(json!(["not", self.unary()?]))
            }
            Some(Token::Open) => {
                self.at += 1;
                let inner = self.or()?;
                self.expect(&Token::Close, ")")?;
                Ok(inner)
            }
            _ => self.comparison(),
        }
    }

    fn comparison(&mut self) -> Result<Value, String> {
        let key = match self.next() {
            Some(Token::Word(word) | Token::Quoted(word)) => {
                format!("${}", word.strip_prefix('$').unwrap_or(&word))
            }
            Some(token) => return Err(format!("expected a property, found {}", describe(&token))),
            None => return Err("expected a property at the end".to_owned()),
        };
        match self.next() {
            Some(Token::Op(op)) => Ok(json!([op, key, self.value()?])),
            Some(Token::In) => Ok(self.list(key)?),
            Some(Token::Not) => {
                self.expect(&Token::In, "in after not")?;
                Ok(json!(["not", self.list(key)?]))
            }
            Some(token) => Err(format!(
                "expected an operator after {key}, found {}",
                describe(&token)
            )),
            None => Err(format!("expected an operator after {key}")),
        }
    }

    fn list(&mut self, key: String) -> Result<Value, String> {
        let close = match self.next() {
            Some(Token::Open) => Token::Close,
            Some(Token::OpenList) => Token::CloseList,
            _ => return Err(format!("expected a list after {key} in, as in (a, b)")),
        };
        let mut out = vec![json!("in"), Value::String(key)];
        loop {
            out.push(self.value()?);
            match self.next() {
                Some(Token::Comma) => {}
                Some(token) if token == close => return Ok(Value::Array(out)),
                _ => return Err("a list is values separated by commas".to_owned()),
            }
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        match self.next() {
            Some(Token::Quoted(text)) => Ok(Value::String(text)),
            Some(Token::Word(word)) => Ok(typed(&word)),
            Some(token) => Err(format!("expected a value, found {}", describe(&token))),
            None => Err("expected a value at the end".to_owned()),
        }
    }
}

fn join(op: &str, clauses: Vec<Value>) -> Value {
    match clauses.len() {
        1 => clauses.into_iter().next().unwrap_or(Value::Null),
        _ => {
            let mut out = vec![json!(op)];
            out.extend(clauses);
            Value::Array(out)
        }
    }
}

/// A bare value: a boolean, a number, or a string.
pub(crate) fn typed(word: &str) -> Value {
    match word {
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(n) = word.parse::<i64>() {
        return json!(n);
    }
    match word.parse::<f64>() {
        Ok(n) if n.is_finite() && word.chars().any(|c| c.is_ascii_digit()) => json!(n),
        _ => Value::String(word.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> Value {
        translate(text).expect("parses").expect("a filter")
    }

    #[test]
    fn comparisons_are_typed() {
        assert_eq!(t("gpu == true"), json!(["==", "$gpu", true]));
        assert_eq!(t("$vcpus>=16"), json!([">=", "$vcpus", 16]));
        assert_eq!(t("cpu_ghz < 3.1"), json!(["<", "$cpu_ghz", 3.1]));
        assert_eq!(t("size != 'large'"), json!(["!=", "$size", "large"]));
        assert_eq!(t("rack = az1-r1"), json!(["==", "$rack", "az1-r1"]));
        assert_eq!(t("version == \"10\""), json!(["==", "$version", "10"]));
        assert_eq!(t("cores <= -1"), json!(["<=", "$cores", -1]));
        assert_eq!(t("a > b"), json!([">", "$a", "b"]));
    }

    #[test]
    fn connectives_nest_with_precedence() {
        assert_eq!(
            t("gpu == true and size == large or ssd == false"),
            json!([
                "or",
                ["and", ["==", "$gpu", true], ["==", "$size", "large"]],
                ["==", "$ssd", false]
            ])
        );
        assert_eq!(
            t("gpu == true && (size == large || cpu_ghz >= 3) && !ssd == true"),
            json!([
                "and",
                ["==", "$gpu", true],
                ["or", ["==", "$size", "large"], [">=", "$cpu_ghz", 3]],
                ["not", ["==", "$ssd", true]]
            ])
        );
        assert_eq!(
            t("availability_zone in (az1, az2) AND NOT rack in [x]"),
            json!([
                "and",
                ["in", "$availability_zone", "az1", "az2"],
                ["not", ["in", "$rack", "x"]]
            ])
        );
        assert_eq!(
            t("zone not in (a, b)"),
            json!(["not", ["in", "$zone", "a", "b"]])
        );
    }

    #[test]
    fn json_passes_through_and_mistakes_are_named() {
        assert_eq!(
            t(r#"["==", "$gpu", "true"]"#),
            json!(["==", "$gpu", "true"])
        );
        assert_eq!(translate("  ").expect("empty"), None);
        for bad in [
            "gpu",
            "gpu ==",
            "gpu == true and",
            "(gpu == true",
            "gpu == true)",
            "gpu & true",
            "'gpu == true",
            "zone in a",
            "[1",
            "{}",
            "== true",
        ] {
            assert!(translate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn clauses_combine() {
        assert_eq!(all(vec![]), None);
        assert_eq!(
            all(vec![json!(["==", "$a", 1])]),
            Some(json!(["==", "$a", 1]))
        );
        assert_eq!(
            all(vec![json!(["==", "$a", 1]), json!(["==", "$b", 2])]),
            Some(json!(["and", ["==", "$a", 1], ["==", "$b", 2]]))
        );
    }
}
