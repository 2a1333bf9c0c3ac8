//! RFC 35 constraint query syntax: the expressions of flux's `--requires`
//! (flux-submit(1)), turned into RFC 31 constraint objects exactly as
//! flux-core's `MiniConstraintParser` builds them.
//!
//! Grammar (flux-core `flux.constraint.parser`, a PLY LALR parser):
//!
//! ```text
//! expr : expr expr          (adjacency: and)
//!      | expr and expr      (and, &, &&)
//!      | expr or expr       (or, |, ||)
//!      | not expr
//!      | '-' term
//!      | '(' expr ')'
//!      | term               ([op:]value, or a quoted string)
//! ```
//!
//! Precedence, lowest first: `or`, `and` and adjacency (left), `not`
//! (right), `-` (right). The parse is shift-reduce with yacc's conflict
//! rule: a completed rule is reduced when the next token binds less
//! tightly (a term or `(` binds least of all), so `a or b c` is
//! `(a or b) c` while `a or b -c` is `a or (b -c)`, as flux has it.
//!
//! Terms: `host:`/`hosts:` give `hostlist`, `rank:` gives `ranks`, a bare
//! word is a property (`^name`: must not have it); properties split on `,`
//! and adjacent property terms merge into one `properties` array. Any
//! other `op:` is kept as that operator (the scheduler refuses unknown
//! ones). The error texts are flux's, word for word, including its
//! unformatted "Mismatched parentheses" message.

use serde_json::{Map, Value};

/// Why a constraint query was refused, in flux's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QueryError(String);

/// Parse an RFC 35 query (`host:n[1-4] and (ssd or -slow)`) into an RFC 31
/// constraint object.
pub fn parse_query(query: &str) -> Result<Value, QueryError> {
    Parser::new(query).parse()
}

/// The `--requires` options as flux combines them: joined by spaces, so
/// several options are ANDed, then parsed as one query.
pub fn requires_constraint<S: AsRef<str>>(requires: &[S]) -> Result<Value, QueryError> {
    let joined: Vec<&str> = requires.iter().map(AsRef::as_ref).collect();
    parse_query(&joined.join(" "))
}

/// A token of the query, with the character position flux reports.
#[derive(Debug, Clone, PartialEq)]
struct Token {
    kind: Kind,
    text: String,
    pos: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Not,
    And,
    Or,
    Negate,
    LParen,
    RParen,
    Term,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LexState {
    Initial,
    Single,
    Double,
}

/// Characters PLY's `t_ignore` skips between tokens.
const IGNORED: &[char] = &[' ', '\t', '\r', '\n', '\x0c', '\x0b'];

/// Python's `\s` (the TOKEN rule stops at any of them, but only `IGNORED`
/// ones are skipped: another is an illegal character, as in flux).
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Python's `\w`.
fn word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The lexer: flux's `ConstraintLexer`, pulled one token at a time by the
/// parser (so a later lexical error never hides an earlier syntax error).
struct Lexer {
    chars: Vec<char>,
    pos: usize,
    state: LexState,
    parens_level: i64,
    last_lparens: usize,
    quote_start: usize,
    /// A term ending in `:` waiting for its value (`host: "a b"`).
    pending: Option<String>,
}

impl Lexer {
    fn new(query: &str) -> Self {
        Lexer {
            chars: query.chars().collect(),
            pos: 0,
            state: LexState::Initial,
            parens_level: 0,
            last_lparens: 0,
            quote_start: 0,
            pending: None,
        }
    }

    /// Whether `word` starts at the current position and ends at a word
    /// boundary (`not\b`).
    fn keyword(&self, word: &str) -> bool {
        let n = word.chars().count();
        let end = self.pos + n;
        end <= self.chars.len()
            && self.chars[self.pos..end].iter().copied().eq(word.chars())
            && self.chars.get(end).is_none_or(|&c| !word_char(c))
    }

    fn token(&mut self, kind: Kind, len: usize) -> Token {
        let text: String = self.chars[self.pos..self.pos + len].iter().collect();
        let tok = Token {
            kind,
            text,
            pos: self.pos,
        };
        self.pos += len;
        tok
    }

    /// flux's `t_TOKEN`: join a pending `op:` with what follows; hold a
    /// term that ends in `:`.
    fn term(&mut self, start: usize, len: usize) -> Option<Token> {
        let mut text: String = self.chars[start..start + len].iter().collect();
        self.pos = start + len;
        if let Some(p) = self.pending.take() {
            text = p + &text;
        } else if text.ends_with(':') {
            self.pending = Some(text);
            return None;
        }
        Some(Token {
            kind: Kind::Term,
            text,
            pos: start,
        })
    }

    /// The next token, `None` at the end.
    fn next(&mut self) -> Result<Option<Token>, QueryError> {
        loop {
            let Some(&c) = self.chars.get(self.pos) else {
                return self.at_end();
            };
            let tok = match self.state {
                LexState::Initial => self.initial(c)?,
                LexState::Single | LexState::Double => self.quoted(c),
            };
            if tok.is_some() {
                return Ok(tok);
            }
        }
    }

    fn at_end(&mut self) -> Result<Option<Token>, QueryError> {
        let pos = self.quote_start;
        match self.state {
            LexState::Single => Err(QueryError(format!(
                "Unclosed quote \"'\" at position {pos}"
            ))),
            LexState::Double => Err(QueryError(format!("Unclosed quote '\"' at position {pos}"))),
            LexState::Initial => match &self.pending {
                Some(p) => Err(QueryError(format!("Missing argument to token '{p}'"))),
                None => Ok(None),
            },
        }
    }

    /// One step in the unquoted state: a token, or `None` when only
    /// something skipped or held was consumed.
    fn initial(&mut self, c: char) -> Result<Option<Token>, QueryError> {
        let run = |ch: char| {
            self.chars[self.pos..]
                .iter()
                .take(2)
                .take_while(|&&x| x == ch)
                .count()
        };
        Ok(Some(match c {
            _ if IGNORED.contains(&c) => {
                self.pos += 1;
                return Ok(None);
            }
            '-' => self.token(Kind::Negate, 1),
            _ if self.keyword("not") => self.token(Kind::Not, 3),
            '&' => {
                let n = run('&');
                self.token(Kind::And, n)
            }
            _ if self.keyword("and") => self.token(Kind::And, 3),
            '|' => {
                let n = run('|');
                self.token(Kind::Or, n)
            }
            _ if self.keyword("or") => self.token(Kind::Or, 2),
            '(' => {
                self.parens_level += 1;
                self.last_lparens = self.pos;
                self.token(Kind::LParen, 1)
            }
            ')' => {
                self.parens_level -= 1;
                self.token(Kind::RParen, 1)
            }
            '\'' | '"' => {
                self.quote_start = self.pos + 1;
                self.state = if c == '\'' {
                    LexState::Single
                } else {
                    LexState::Double
                };
                self.pos += 1;
                return Ok(None);
            }
            _ if python_space(c) => {
                return Err(QueryError(format!(
                    "Illegal character '{c}' at position {}",
                    self.pos
                )));
            }
            _ => {
                let len = self.chars[self.pos..]
                    .iter()
                    .take_while(|&&x| !"()|&\"'".contains(x) && !python_space(x))
                    .count();
                return Ok(self.term(self.pos, len));
            }
        }))
    }

    /// One step inside quotes: the text up to the closing quote is one
    /// term, spaces and operators included.
    fn quoted(&mut self, c: char) -> Option<Token> {
        let quote = if self.state == LexState::Single {
            '\''
        } else {
            '"'
        };
        if c == quote {
            self.state = LexState::Initial;
            self.pos += 1;
            return None;
        }
        let len = self.chars[self.pos..]
            .iter()
            .take_while(|&&x| x != quote)
            .count();
        self.term(self.pos, len)
    }
}

/// A symbol on the parser's stack.
#[derive(Debug)]
enum Sym {
    Expr(Value),
    And,
    Or,
    Not,
    LParen,
}

/// A rule whose right-hand side is complete on top of the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// `expr expr` or `expr and expr`.
    And,
    Or,
    Not,
}

impl Rule {
    /// yacc precedence level of the rule.
    fn level(self) -> u8 {
        match self {
            Rule::Or => 1,
            Rule::And => 2,
            Rule::Not => 3,
        }
    }
}

struct Parser<'a> {
    query: &'a str,
    lexer: Lexer,
    stack: Vec<Sym>,
}

impl<'a> Parser<'a> {
    fn new(query: &'a str) -> Self {
        Parser {
            query,
            lexer: Lexer::new(query),
            stack: Vec::new(),
        }
    }

    /// flux's `p_error` for an unexpected token (`None`: the end).
    fn error(&self, tok: Option<&Token>) -> QueryError {
        QueryError(match tok {
            None if self.lexer.parens_level > 0 => format!(
                "Unclosed parenthesis in position {}",
                self.lexer.last_lparens
            ),
            None => format!("Unexpected end of input in '{}'", self.query),
            // flux's message lacks its f-string prefix and prints the
            // placeholder itself; users see exactly this.
            Some(_) if self.lexer.parens_level < 0 => {
                "Mismatched parentheses starting at position {self.lexer.last_rparens}.".to_string()
            }
            Some(t) => format!("Invalid token '{}' at position {}", t.text, t.pos),
        })
    }

    fn parse(mut self) -> Result<Value, QueryError> {
        loop {
            let tok = self.lexer.next()?;
            if matches!(self.stack.last(), Some(Sym::Expr(_))) {
                self.reduce_before(tok.as_ref().map(|t| t.kind));
                match tok.as_ref().map(|t| t.kind) {
                    Some(Kind::And) => self.stack.push(Sym::And),
                    Some(Kind::Or) => self.stack.push(Sym::Or),
                    Some(Kind::RParen) => self.close_paren(tok.as_ref())?,
                    None => return self.finish(),
                    // Adjacency: the start of another expression.
                    Some(_) => self.operand(tok)?,
                }
            } else {
                self.operand(tok)?;
            }
        }
    }

    /// The start of an expression: a term, `-term`, `not`, or `(`.
    fn operand(&mut self, tok: Option<Token>) -> Result<(), QueryError> {
        let Some(t) = tok else {
            return Err(self.error(None));
        };
        match t.kind {
            Kind::Term => {
                let v = term(&t.text)?;
                self.stack.push(Sym::Expr(v));
            }
            Kind::Negate => {
                let next = self.lexer.next()?;
                match next {
                    Some(n) if n.kind == Kind::Term => {
                        let v = term(&n.text)?;
                        self.stack.push(Sym::Expr(single("not", vec![v])));
                    }
                    other => return Err(self.error(other.as_ref())),
                }
            }
            Kind::Not => self.stack.push(Sym::Not),
            Kind::LParen => self.stack.push(Sym::LParen),
            Kind::And | Kind::Or | Kind::RParen => return Err(self.error(Some(&t))),
        }
        Ok(())
    }

    /// The rule complete on top of the stack, if any.
    fn top_rule(&self) -> Option<Rule> {
        let n = self.stack.len();
        if n < 2 || !matches!(self.stack[n - 1], Sym::Expr(_)) {
            return None;
        }
        match self.stack[n - 2] {
            Sym::Expr(_) | Sym::And => Some(Rule::And),
            Sym::Or => Some(Rule::Or),
            Sym::Not => Some(Rule::Not),
            Sym::LParen => None,
        }
    }

    /// Reduce what yacc's precedence rule reduces before the lookahead
    /// `next` is shifted: while the completed rule binds at least as tightly
    /// as `next` (ties go to reduce for the left-associative rules).
    fn reduce_before(&mut self, next: Option<Kind>) {
        // Precedence of the lookahead; `None`: the end or `)`, which close
        // every open rule.
        let shift_level = match next {
            Some(Kind::Term) | Some(Kind::LParen) => Some(0),
            Some(Kind::Or) => Some(1),
            Some(Kind::And) => Some(2),
            Some(Kind::Not) => Some(3),
            Some(Kind::Negate) => Some(4),
            Some(Kind::RParen) | None => None,
        };
        while let Some(rule) = self.top_rule() {
            let reduce = match shift_level {
                None => true,
                Some(s) => s < rule.level() || (s == rule.level() && rule != Rule::Not),
            };
            if !reduce {
                break;
            }
            self.reduce(rule);
        }
    }

    fn pop_expr(&mut self) -> Value {
        match self.stack.pop() {
            Some(Sym::Expr(v)) => v,
            _ => Value::Null,
        }
    }

    fn reduce(&mut self, rule: Rule) {
        let right = self.pop_expr();
        let op = self.stack.pop();
        let v = match (rule, op) {
            (Rule::Not, _) => single("not", vec![right]),
            (Rule::And, Some(Sym::Expr(left))) => combine_and(left, right),
            (Rule::And, _) => {
                let left = self.pop_expr();
                combine_and(left, right)
            }
            (Rule::Or, _) => {
                let left = self.pop_expr();
                combine_or(left, right)
            }
        };
        self.stack.push(Sym::Expr(v));
    }

    fn close_paren(&mut self, tok: Option<&Token>) -> Result<(), QueryError> {
        let n = self.stack.len();
        if n >= 2 && matches!(self.stack[n - 2], Sym::LParen) {
            let v = self.pop_expr();
            self.stack.pop();
            self.stack.push(Sym::Expr(v));
            Ok(())
        } else {
            Err(self.error(tok))
        }
    }

    fn finish(mut self) -> Result<Value, QueryError> {
        if self.stack.len() == 1 {
            return Ok(self.pop_expr());
        }
        Err(self.error(None))
    }
}

/// `{op: values}`.
fn single(op: &str, values: Vec<Value>) -> Value {
    let mut m = Map::new();
    m.insert(op.to_string(), Value::Array(values));
    Value::Object(m)
}

/// The operator of a one-key constraint object and its values.
fn parts(v: &mut Value) -> Option<(&str, &mut Vec<Value>)> {
    let (k, vals) = v.as_object_mut()?.iter_mut().next()?;
    Some((k.as_str(), vals.as_array_mut()?))
}

/// flux's `combine_like_terms`: an `and` on the left takes the right side
/// in; two `properties` merge; anything else is a new `and`.
fn combine_and(mut left: Value, mut right: Value) -> Value {
    match parts(&mut left) {
        Some(("and", vals)) => {
            vals.push(right);
            return left;
        }
        Some(("properties", vals)) => {
            if let Some(("properties", more)) = parts(&mut right) {
                vals.append(more);
                return left;
            }
        }
        _ => {}
    }
    single("and", vec![left, right])
}

/// An `or` on the left takes the right side in; else a new `or`.
fn combine_or(mut left: Value, right: Value) -> Value {
    if let Some(("or", vals)) = parts(&mut left) {
        vals.push(right);
        return left;
    }
    single("or", vec![left, right])
}

/// One `[op:]value` term as flux's `MiniConstraintParser` maps it.
fn term(text: &str) -> Result<Value, QueryError> {
    let (op, value) = match text.split_once(':') {
        None => ("properties", text),
        Some(("host" | "hosts", v)) => ("hostlist", v),
        Some(("rank", v)) => ("ranks", v),
        Some((op, v)) => (op, v),
    };
    if let Some(c) = op.chars().find(|&c| !(word_char(c) || ".+@-".contains(c))) {
        return Err(QueryError(format!(
            "invalid character '{c}' in operator '{op}:'"
        )));
    }
    let values = if op == "properties" {
        value.split(',').map(Value::from).collect()
    } else {
        vec![Value::from(value)]
    };
    Ok(single(op, values))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Queries and what flux-core 0.88's parser makes of them (the JSON
    /// object, or its error text), recorded from flux's own parser.
    const TABLE: &[(&str, Result<&str, &str>)] = &[
        ("ssd", Ok("{\"properties\":[\"ssd\"]}")),
        ("ssd,gpu", Ok("{\"properties\":[\"ssd\",\"gpu\"]}")),
        ("ssd gpu", Ok("{\"properties\":[\"ssd\",\"gpu\"]}")),
        ("ssd and gpu", Ok("{\"properties\":[\"ssd\",\"gpu\"]}")),
        ("ssd && gpu", Ok("{\"properties\":[\"ssd\",\"gpu\"]}")),
        ("ssd & gpu", Ok("{\"properties\":[\"ssd\",\"gpu\"]}")),
        (
            "ssd or gpu",
            Ok("{\"or\":[{\"properties\":[\"ssd\"]},{\"properties\":[\"gpu\"]}]}"),
        ),
        (
            "ssd || gpu",
            Ok("{\"or\":[{\"properties\":[\"ssd\"]},{\"properties\":[\"gpu\"]}]}"),
        ),
        (
            "ssd | gpu",
            Ok("{\"or\":[{\"properties\":[\"ssd\"]},{\"properties\":[\"gpu\"]}]}"),
        ),
        ("not ssd", Ok("{\"not\":[{\"properties\":[\"ssd\"]}]}")),
        ("-ssd", Ok("{\"not\":[{\"properties\":[\"ssd\"]}]}")),
        ("^ssd", Ok("{\"properties\":[\"^ssd\"]}")),
        (
            "ssd -gpu",
            Ok("{\"and\":[{\"properties\":[\"ssd\"]},{\"not\":[{\"properties\":[\"gpu\"]}]}]}"),
        ),
        (
            "-ssd -gpu",
            Ok(
                "{\"and\":[{\"not\":[{\"properties\":[\"ssd\"]}]},{\"not\":[{\"properties\":[\"gpu\"]}]}]}",
            ),
        ),
        ("host:node[1-4]", Ok("{\"hostlist\":[\"node[1-4]\"]}")),
        (
            "host:node[1-4] and gpu",
            Ok("{\"and\":[{\"hostlist\":[\"node[1-4]\"]},{\"properties\":[\"gpu\"]}]}"),
        ),
        ("hosts:foo1", Ok("{\"hostlist\":[\"foo1\"]}")),
        ("rank:0", Ok("{\"ranks\":[\"0\"]}")),
        ("rank:0-3,5", Ok("{\"ranks\":[\"0-3,5\"]}")),
        (
            "host:a or rank:1",
            Ok("{\"or\":[{\"hostlist\":[\"a\"]},{\"ranks\":[\"1\"]}]}"),
        ),
        (
            "host:X or rank:1",
            Ok("{\"or\":[{\"hostlist\":[\"X\"]},{\"ranks\":[\"1\"]}]}"),
        ),
        (
            "(ssd or gpu) and host:a",
            Ok(
                "{\"and\":[{\"or\":[{\"properties\":[\"ssd\"]},{\"properties\":[\"gpu\"]}]},{\"hostlist\":[\"a\"]}]}",
            ),
        ),
        (
            "not (ssd or gpu)",
            Ok("{\"not\":[{\"or\":[{\"properties\":[\"ssd\"]},{\"properties\":[\"gpu\"]}]}]}"),
        ),
        (
            "not ssd gpu",
            Ok("{\"and\":[{\"not\":[{\"properties\":[\"ssd\"]}]},{\"properties\":[\"gpu\"]}]}"),
        ),
        (
            "ssd or gpu fast",
            Ok(
                "{\"and\":[{\"or\":[{\"properties\":[\"ssd\"]},{\"properties\":[\"gpu\"]}]},{\"properties\":[\"fast\"]}]}",
            ),
        ),
        (
            "ssd gpu or fast",
            Ok("{\"or\":[{\"properties\":[\"ssd\",\"gpu\"]},{\"properties\":[\"fast\"]}]}"),
        ),
        (
            "ssd or gpu and fast",
            Ok("{\"or\":[{\"properties\":[\"ssd\"]},{\"properties\":[\"gpu\",\"fast\"]}]}"),
        ),
        (
            "ssd and gpu or fast",
            Ok("{\"or\":[{\"properties\":[\"ssd\",\"gpu\"]},{\"properties\":[\"fast\"]}]}"),
        ),
        (
            "a or b or c",
            Ok(
                "{\"or\":[{\"properties\":[\"a\"]},{\"properties\":[\"b\"]},{\"properties\":[\"c\"]}]}",
            ),
        ),
        (
            "(a or b) or c",
            Ok(
                "{\"or\":[{\"properties\":[\"a\"]},{\"properties\":[\"b\"]},{\"properties\":[\"c\"]}]}",
            ),
        ),
        (
            "a or (b or c)",
            Ok(
                "{\"or\":[{\"properties\":[\"a\"]},{\"or\":[{\"properties\":[\"b\"]},{\"properties\":[\"c\"]}]}]}",
            ),
        ),
        ("a b c", Ok("{\"properties\":[\"a\",\"b\",\"c\"]}")),
        (
            "host:a b c",
            Ok(
                "{\"and\":[{\"hostlist\":[\"a\"]},{\"properties\":[\"b\"]},{\"properties\":[\"c\"]}]}",
            ),
        ),
        ("(a b) c", Ok("{\"properties\":[\"a\",\"b\",\"c\"]}")),
        ("a (b c)", Ok("{\"properties\":[\"a\",\"b\",\"c\"]}")),
        (
            "a (host:x y)",
            Ok(
                "{\"and\":[{\"properties\":[\"a\"]},{\"and\":[{\"hostlist\":[\"x\"]},{\"properties\":[\"y\"]}]}]}",
            ),
        ),
        (
            "(host:x y) z",
            Ok(
                "{\"and\":[{\"hostlist\":[\"x\"]},{\"properties\":[\"y\"]},{\"properties\":[\"z\"]}]}",
            ),
        ),
        (
            "a b -c",
            Ok(
                "{\"and\":[{\"properties\":[\"a\"]},{\"and\":[{\"properties\":[\"b\"]},{\"not\":[{\"properties\":[\"c\"]}]}]}]}",
            ),
        ),
        (
            "a or b -c",
            Ok(
                "{\"or\":[{\"properties\":[\"a\"]},{\"and\":[{\"properties\":[\"b\"]},{\"not\":[{\"properties\":[\"c\"]}]}]}]}",
            ),
        ),
        (
            "a or b not c",
            Ok(
                "{\"or\":[{\"properties\":[\"a\"]},{\"and\":[{\"properties\":[\"b\"]},{\"not\":[{\"properties\":[\"c\"]}]}]}]}",
            ),
        ),
        (
            "not a not b",
            Ok(
                "{\"not\":[{\"and\":[{\"properties\":[\"a\"]},{\"not\":[{\"properties\":[\"b\"]}]}]}]}",
            ),
        ),
        (
            "not not a",
            Ok("{\"not\":[{\"not\":[{\"properties\":[\"a\"]}]}]}"),
        ),
        (
            "a -b or c",
            Ok(
                "{\"or\":[{\"and\":[{\"properties\":[\"a\"]},{\"not\":[{\"properties\":[\"b\"]}]}]},{\"properties\":[\"c\"]}]}",
            ),
        ),
        (
            "-a or -b",
            Ok(
                "{\"or\":[{\"not\":[{\"properties\":[\"a\"]}]},{\"not\":[{\"properties\":[\"b\"]}]}]}",
            ),
        ),
        ("\"a b\"", Ok("{\"properties\":[\"a b\"]}")),
        ("'a b'", Ok("{\"properties\":[\"a b\"]}")),
        ("host:\"foo bar\"", Ok("{\"hostlist\":[\"foo bar\"]}")),
        ("host: foo", Ok("{\"hostlist\":[\"foo\"]}")),
        ("\"foo:\" bar", Ok("{\"foo\":[\"bar\"]}")),
        ("x'y'", Ok("{\"properties\":[\"x\",\"y\"]}")),
        ("a,,b", Ok("{\"properties\":[\"a\",\"\",\"b\"]}")),
        (
            "a and-b",
            Ok("{\"and\":[{\"properties\":[\"a\"]},{\"not\":[{\"properties\":[\"b\"]}]}]}"),
        ),
        (
            "nothing and notable",
            Ok("{\"properties\":[\"nothing\",\"notable\"]}"),
        ),
        ("AND", Ok("{\"properties\":[\"AND\"]}")),
        ("and", Err("Invalid token 'and' at position 0")),
        ("foo and", Err("Unexpected end of input in 'foo and'")),
        ("and foo", Err("Invalid token 'and' at position 0")),
        ("or foo", Err("Invalid token 'or' at position 0")),
        ("foo or", Err("Unexpected end of input in 'foo or'")),
        (
            "foo )",
            Err("Mismatched parentheses starting at position {self.lexer.last_rparens}."),
        ),
        ("(foo", Err("Unclosed parenthesis in position 0")),
        ("((foo)", Err("Unclosed parenthesis in position 1")),
        (
            "(foo))",
            Err("Mismatched parentheses starting at position {self.lexer.last_rparens}."),
        ),
        ("()", Err("Invalid token ')' at position 1")),
        ("-(a|b)", Err("Invalid token '(' at position 1")),
        ("--foo", Err("Invalid token '-' at position 1")),
        ("a &&& b", Err("Invalid token '&' at position 4")),
        ("'unclosed", Err("Unclosed quote \"'\" at position 1")),
        ("\"unclosed", Err("Unclosed quote '\"' at position 1")),
        ("host:", Err("Missing argument to token 'host:'")),
        ("x/y:foo", Err("invalid character '/' in operator 'x/y:'")),
        (":foo", Ok("{\"\":[\"foo\"]}")),
        ("or:foo", Err("Invalid token 'or' at position 0")),
        ("a:b:c", Ok("{\"a\":[\"b:c\"]}")),
        ("foo:bar", Ok("{\"foo\":[\"bar\"]}")),
        ("not", Err("Unexpected end of input in 'not'")),
        ("-", Err("Unexpected end of input in '-'")),
        ("a\tb", Ok("{\"properties\":[\"a\",\"b\"]}")),
        (
            "rank:1 rank:2",
            Ok("{\"and\":[{\"ranks\":[\"1\"]},{\"ranks\":[\"2\"]}]}"),
        ),
        (
            "^a ^b -c",
            Ok(
                "{\"and\":[{\"properties\":[\"^a\"]},{\"and\":[{\"properties\":[\"^b\"]},{\"not\":[{\"properties\":[\"c\"]}]}]}]}",
            ),
        ),
        ("-^a", Ok("{\"not\":[{\"properties\":[\"^a\"]}]}")),
        (
            "host:x rank:1 a b",
            Ok(
                "{\"and\":[{\"hostlist\":[\"x\"]},{\"ranks\":[\"1\"]},{\"properties\":[\"a\"]},{\"properties\":[\"b\"]}]}",
            ),
        ),
        (
            "a b host:x c d",
            Ok(
                "{\"and\":[{\"properties\":[\"a\",\"b\"]},{\"hostlist\":[\"x\"]},{\"properties\":[\"c\"]},{\"properties\":[\"d\"]}]}",
            ),
        ),
        ("(a) (b)", Ok("{\"properties\":[\"a\",\"b\"]}")),
        ("((a))", Ok("{\"properties\":[\"a\"]}")),
        (
            "a ) \"x",
            Err("Mismatched parentheses starting at position {self.lexer.last_rparens}."),
        ),
        ("(a or b", Err("Unclosed parenthesis in position 0")),
        (
            "a||b||c",
            Ok(
                "{\"or\":[{\"properties\":[\"a\"]},{\"properties\":[\"b\"]},{\"properties\":[\"c\"]}]}",
            ),
        ),
        ("a&&b&&c", Ok("{\"properties\":[\"a\",\"b\",\"c\"]}")),
        ("", Err("Unexpected end of input in ''")),
        (
            "a b:c/d:e",
            Ok("{\"and\":[{\"properties\":[\"a\"]},{\"b\":[\"c/d:e\"]}]}"),
        ),
        ("x.y+z@w-v:foo", Ok("{\"x.y+z@w-v\":[\"foo\"]}")),
        ("a or", Err("Unexpected end of input in 'a or'")),
        ("\"\" a", Ok("{\"properties\":[\"a\"]}")),
        ("host:\"\"", Err("Missing argument to token 'host:'")),
        (
            "a  b)",
            Err("Mismatched parentheses starting at position {self.lexer.last_rparens}."),
        ),
        (
            "(a b))",
            Err("Mismatched parentheses starting at position {self.lexer.last_rparens}."),
        ),
        ("(a) or", Err("Unexpected end of input in '(a) or'")),
        ("a (", Err("Unclosed parenthesis in position 2")),
        (
            "x y) (",
            Err("Mismatched parentheses starting at position {self.lexer.last_rparens}."),
        ),
        ("a\u{a0}b", Err("Illegal character '\u{a0}' at position 1")),
        ("ab\"c d\"", Ok("{\"properties\":[\"ab\",\"c d\"]}")),
        ("not(a)", Ok("{\"not\":[{\"properties\":[\"a\"]}]}")),
        (
            "a|(b&c)",
            Ok("{\"or\":[{\"properties\":[\"a\"]},{\"properties\":[\"b\",\"c\"]}]}"),
        ),
        ("host:a,b", Ok("{\"hostlist\":[\"a,b\"]}")),
        ("  ssd  ", Ok("{\"properties\":[\"ssd\"]}")),
        ("a !b", Ok("{\"properties\":[\"a\",\"!b\"]}")),
        (
            "a -b -c",
            Ok(
                "{\"and\":[{\"properties\":[\"a\"]},{\"and\":[{\"not\":[{\"properties\":[\"b\"]}]},{\"not\":[{\"properties\":[\"c\"]}]}]}]}",
            ),
        ),
    ];

    #[test]
    fn table_matches_flux() {
        assert!(TABLE.len() >= 40);
        for (query, want) in TABLE {
            let got = parse_query(query)
                .map(|v| v.to_string())
                .map_err(|e| e.to_string());
            let want = want.map(str::to_string).map_err(str::to_string);
            assert_eq!(got, want, "query {query:?}");
        }
    }

    #[test]
    fn several_requires_are_joined_by_spaces() {
        // As flux: the options are one query, so an `or` in the second
        // binds the first's terms too.
        let v = requires_constraint(&["host:a", "ssd or gpu"]).unwrap();
        assert_eq!(
            v.to_string(),
            r#"{"or":[{"and":[{"hostlist":["a"]},{"properties":["ssd"]}]},{"properties":["gpu"]}]}"#
        );
        let v = requires_constraint(&["host:a", "(ssd or gpu)"]).unwrap();
        assert_eq!(
            v.to_string(),
            r#"{"and":[{"hostlist":["a"]},{"or":[{"properties":["ssd"]},{"properties":["gpu"]}]}]}"#
        );
    }

    #[test]
    fn lexical_errors_after_a_syntax_error_are_not_reached() {
        // flux's lexer is pulled token by token: the `)` is refused before
        // the unclosed quote is seen.
        assert_eq!(
            parse_query("a ) \"x").unwrap_err().to_string(),
            "Mismatched parentheses starting at position {self.lexer.last_rparens}."
        );
    }
}
