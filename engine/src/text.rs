//! The text form: define an operator in a few lines instead of Rust.
//!
//! ```text
//! # matrix multiply
//! C[i,j] += A[i,k] * B[k,j] where i<512, j<512, k<512
//! ```
//!
//! Each statement defines one compute stage named after its output. Tensors that are read but
//! never defined become inputs whose shapes are inferred from the reads. `docs/text-form.md` is
//! the user-facing description; this module implements exactly that.
//!
//! Three small steps: a lexer, a recursive-descent parser that builds an untyped syntax tree,
//! and a lowering pass that resolves names and builds the [`ComputeDag`]. The tree is untyped
//! because a subexpression's role depends on where it sits: `h - 1` is an affine index inside
//! `[...]` and a number elsewhere, and `a < b` compares indices or values depending on its
//! operands. Lowering decides, with the whole statement (its variables and extents) in hand.

use crate::ir::dag::guarded_range;
use crate::ir::{
    Affine, Axis, BinaryOp, CmpOp, ComputeDag, Cond, DType, DagError, Expr, ReduceOp, Stage,
    StageKind, UnaryOp,
};
use std::collections::HashMap;

/// Largest integer constant or coefficient in an index expression, and largest extent. Small
/// enough that no range computation anywhere in the engine can overflow an `i64`.
const MAX_INDEX_INT: i64 = 1 << 24;
/// Largest iteration space of one statement, and largest input tensor (elements).
const MAX_POINTS: i64 = 1 << 40;
/// Deepest nesting of brackets and parentheses. The parser recurses on them, so a hostile
/// input must not be able to exhaust the stack.
const MAX_NESTING: usize = 64;
/// Deepest expression tree: every later pass over an `Expr` recurses too.
const MAX_TREE_DEPTH: usize = 256;

const FUNCTIONS: &str = "exp, log, sqrt, rsqrt, tanh, sigmoid, abs, relu, max, min, select";

/// A parse error, syntactic or semantic, with the position of the offending token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {message}")]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub col: usize,
    /// Byte offset into the source.
    pub offset: usize,
    /// What was expected here.
    pub expected: String,
    /// What was found instead.
    pub found: String,
    /// The explanation shown after the position: `expected X, found Y` for syntax errors, a
    /// sentence saying what is wrong and how to fix it for the others.
    pub message: String,
}

impl ParseError {
    fn at(
        src: &str,
        offset: usize,
        expected: impl Into<String>,
        found: impl Into<String>,
        message: Option<String>,
    ) -> Self {
        let (line, col) = line_col(src, offset);
        let (expected, found) = (expected.into(), found.into());
        let message = message.unwrap_or_else(|| format!("expected {expected}, found {found}"));
        ParseError {
            line,
            col,
            offset,
            expected,
            found,
            message,
        }
    }
}

fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let before = &src[..offset];
    let line_start = before.rfind('\n').map_or(0, |p| p + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

/// Parses a program in the text form into a validated compute DAG.
///
/// Inputs come first, in order of first mention, then one compute stage per statement, in
/// order; every stage is `f32`.
pub fn parse(src: &str) -> Result<ComputeDag, ParseError> {
    let toks = lex(src)?;
    let stmts = Parser {
        src,
        toks,
        pos: 0,
        nesting: 0,
    }
    .program()?;
    lower(src, &stmts)
}

// ---------------------------------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// A numeric literal; `int` is set when it is written as an integer that fits an `i64`.
    Num {
        text: String,
        value: f64,
        int: Option<i64>,
    },
    Sym(&'static str),
    Semi,
    /// A newline outside brackets; inside brackets newlines are plain whitespace, so that a
    /// long read or call can wrap.
    Newline,
    Eof,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    offset: usize,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("'{s}'"),
        Tok::Num { text, .. } => format!("'{text}'"),
        Tok::Sym(s) => format!("'{s}'"),
        Tok::Semi => "';'".into(),
        Tok::Newline => "end of line".into(),
        Tok::Eof => "end of input".into(),
    }
}

/// Longest first, so that `<=` is not lexed as `<` `=`.
const SYMBOLS: [&str; 20] = [
    "+=", "<=", ">=", "==", "!=", "&&", "||", "[", "]", "(", ")", ",", "+", "-", "*", "/", "<",
    ">", "=", "!",
];

fn lex(src: &str) -> Result<Vec<Token>, ParseError> {
    let b = src.as_bytes();
    let mut toks = vec![];
    let mut i = 0;
    let mut depth = 0usize;
    // Only ASCII bytes are consumed one at a time, so `i` is always on a char boundary.
    while i < b.len() {
        let start = i;
        match b[i] {
            b' ' | b'\t' | b'\r' => i += 1,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'\n' => {
                if depth == 0 {
                    toks.push(Token {
                        tok: Tok::Newline,
                        offset: i,
                    });
                }
                i += 1;
            }
            b';' => {
                toks.push(Token {
                    tok: Tok::Semi,
                    offset: i,
                });
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                toks.push(Token {
                    tok: Tok::Ident(src[start..i].into()),
                    offset: start,
                });
            }
            c if c.is_ascii_digit() => {
                let (tok, end) = lex_number(src, start)?;
                toks.push(Token { tok, offset: start });
                i = end;
            }
            c => {
                let Some(sym) = SYMBOLS.iter().find(|s| b[i..].starts_with(s.as_bytes())) else {
                    let ch = src[i..].chars().next().unwrap_or('?');
                    let expected = match c {
                        b'&' => "'&&'",
                        b'|' => "'||'",
                        _ => "a name, a number, an operator or a bracket",
                    };
                    return Err(ParseError::at(src, i, expected, format!("'{ch}'"), None));
                };
                match *sym {
                    "[" | "(" => depth += 1,
                    "]" | ")" => depth = depth.saturating_sub(1),
                    _ => {}
                }
                toks.push(Token {
                    tok: Tok::Sym(sym),
                    offset: i,
                });
                i += sym.len();
            }
        }
    }
    toks.push(Token {
        tok: Tok::Eof,
        offset: b.len(),
    });
    Ok(toks)
}

/// `digits [. digits*] [(e|E) [+|-] digits]`, starting at a digit.
fn lex_number(src: &str, start: usize) -> Result<(Tok, usize), ParseError> {
    let b = src.as_bytes();
    let digits = |mut j: usize| {
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        j
    };
    let mut j = digits(start);
    let mut is_int = true;
    if j < b.len() && b[j] == b'.' {
        is_int = false;
        j = digits(j + 1);
    }
    if j < b.len() && (b[j] == b'e' || b[j] == b'E') {
        let mut k = j + 1;
        if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
            k += 1;
        }
        if k >= b.len() || !b[k].is_ascii_digit() {
            let found = src[k..]
                .chars()
                .next()
                .map_or("end of input".into(), |c| format!("'{c}'"));
            return Err(ParseError::at(
                src,
                k,
                "digits of the exponent",
                found,
                None,
            ));
        }
        is_int = false;
        j = digits(k);
    }
    let text = &src[start..j];
    let value: f64 = text.parse().unwrap_or(f64::INFINITY);
    if !value.is_finite() {
        return Err(ParseError::at(
            src,
            start,
            "a finite number",
            format!("'{text}'"),
            None,
        ));
    }
    let int = if is_int { text.parse().ok() } else { None };
    Ok((
        Tok::Num {
            text: text.into(),
            value,
            int,
        },
        j,
    ))
}

// ---------------------------------------------------------------------------------------------
// Syntax tree and parser

struct Node {
    kind: NodeKind,
    /// Offset of the token that identifies the node (a name, a literal, an operator): where
    /// errors about that token point.
    pos: usize,
    /// Offset of the node's first token: where errors about the whole node point.
    start: usize,
    depth: usize,
}

enum NodeKind {
    Num {
        text: String,
        value: f64,
        int: Option<i64>,
    },
    Var(String),
    Read(String, Vec<Node>),
    Call(String, Vec<Node>),
    Neg(Box<Node>),
    Bin(BinaryOp, Box<Node>, Box<Node>),
    Cmp(CmpOp, Box<Node>, Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>),
}

impl NodeKind {
    /// Children in source order.
    fn children(&self) -> Vec<&Node> {
        match self {
            NodeKind::Num { .. } | NodeKind::Var(_) => vec![],
            NodeKind::Read(_, args) | NodeKind::Call(_, args) => args.iter().collect(),
            NodeKind::Neg(a) | NodeKind::Not(a) => vec![a],
            NodeKind::Bin(_, a, b)
            | NodeKind::Cmp(_, a, b)
            | NodeKind::And(a, b)
            | NodeKind::Or(a, b) => vec![a, b],
        }
    }
}

struct InputDecl {
    name: String,
    pos: usize,
    shape: Vec<i64>,
}

struct ComputeStmt {
    name: String,
    pos: usize,
    lhs: Vec<(String, usize)>,
    reduce: Option<ReduceOp>,
    op: &'static str,
    op_pos: usize,
    body: Node,
    bounds: Vec<Bound>,
}

/// `var < extent` from a where clause.
struct Bound {
    var: String,
    pos: usize,
    extent: i64,
}

enum Stmt {
    Input(InputDecl),
    Compute(ComputeStmt),
}

impl Stmt {
    fn name_pos(&self) -> (&str, usize) {
        match self {
            Stmt::Input(d) => (&d.name, d.pos),
            Stmt::Compute(c) => (&c.name, c.pos),
        }
    }
}

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    pos: usize,
    nesting: usize,
}

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    fn peek2(&self) -> &Tok {
        &self.toks[(self.pos + 1).min(self.toks.len() - 1)].tok
    }

    fn offset(&self) -> usize {
        self.toks[self.pos].offset
    }

    fn bump(&mut self) {
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Sym(x) if *x == s)
    }

    fn is_keyword(&self, k: &str) -> bool {
        matches!(self.peek(), Tok::Ident(x) if x == k)
    }

    fn at_end_of_statement(&self) -> bool {
        matches!(self.peek(), Tok::Semi | Tok::Newline | Tok::Eof)
    }

    /// Consumes symbol `s` if it is next, returning its offset.
    fn eat(&mut self, s: &str) -> Option<usize> {
        let off = self.offset();
        self.is_sym(s).then(|| {
            self.bump();
            off
        })
    }

    fn expected(&self, what: &str) -> ParseError {
        ParseError::at(self.src, self.offset(), what, describe(self.peek()), None)
    }

    fn expect(&mut self, s: &'static str, what: &str) -> Result<usize, ParseError> {
        self.eat(s).ok_or_else(|| self.expected(what))
    }

    /// A name; `where` is reserved, since it ends an expression.
    fn ident(&mut self, what: &str) -> Result<(String, usize), ParseError> {
        let off = self.offset();
        match self.peek() {
            Tok::Ident(s) if s != "where" => {
                let s = s.clone();
                self.bump();
                Ok((s, off))
            }
            _ => Err(self.expected(what)),
        }
    }

    fn extent(&mut self) -> Result<i64, ParseError> {
        match self.peek() {
            Tok::Num { int: Some(v), .. } if (1..=MAX_INDEX_INT).contains(v) => {
                let v = *v;
                self.bump();
                Ok(v)
            }
            _ => Err(self.expected("a positive integer extent (at most 16777216)")),
        }
    }

    fn node(&self, kind: NodeKind, pos: usize) -> Result<Node, ParseError> {
        let depth = 1 + kind.children().iter().map(|c| c.depth).max().unwrap_or(0);
        if depth > MAX_TREE_DEPTH {
            let msg = format!(
                "the expression is too deep (at most {MAX_TREE_DEPTH} nested operations): \
                 split it into several statements"
            );
            return Err(ParseError::at(
                self.src,
                pos,
                "a smaller expression",
                "a deeper one",
                Some(msg),
            ));
        }
        let start = kind
            .children()
            .iter()
            .map(|c| c.start)
            .fold(pos, usize::min);
        Ok(Node {
            kind,
            pos,
            start,
            depth,
        })
    }

    fn program(&mut self) -> Result<Vec<Stmt>, ParseError> {
        let mut stmts = vec![];
        loop {
            while matches!(self.peek(), Tok::Semi | Tok::Newline) {
                self.bump();
            }
            if *self.peek() == Tok::Eof {
                break;
            }
            stmts.push(self.statement()?);
        }
        if stmts.is_empty() {
            return Err(self.expected("a statement, such as 'C[i] = A[i] * 2 where i < 16'"));
        }
        Ok(stmts)
    }

    fn statement(&mut self) -> Result<Stmt, ParseError> {
        let (name, pos) = self.ident("a tensor name or 'input'")?;
        // `input` only starts a declaration when a name follows: `input[i] = ...` defines a
        // tensor called `input`.
        if name == "input" && matches!(self.peek(), Tok::Ident(_)) {
            let (name, pos) = self.ident("an input name")?;
            self.expect("[", "'['")?;
            let mut shape = vec![self.extent()?];
            while self.eat(",").is_some() {
                shape.push(self.extent()?);
            }
            self.expect("]", "',' or ']'")?;
            if !self.at_end_of_statement() {
                return Err(self.expected("';' or a new line after the declaration"));
            }
            return Ok(Stmt::Input(InputDecl { name, pos, shape }));
        }
        self.expect("[", "'['")?;
        let mut lhs = vec![];
        loop {
            lhs.push(self.ident("a variable name (left-hand indices are plain variables)")?);
            if self.eat(",").is_none() {
                break;
            }
        }
        self.expect("]", "',' or ']'")?;
        let op_pos = self.offset();
        let (reduce, op) = match self.peek() {
            Tok::Sym("=") => (None, "="),
            Tok::Sym("+=") => (Some(ReduceOp::Sum), "+="),
            // `max=` lexes as `max` `=`; right after the left-hand side nothing else can
            // follow, so this is unambiguous.
            Tok::Ident(s) if s == "max" && *self.peek2() == Tok::Sym("=") => {
                self.bump();
                (Some(ReduceOp::Max), "max=")
            }
            Tok::Ident(s) if s == "min" && *self.peek2() == Tok::Sym("=") => {
                self.bump();
                (Some(ReduceOp::Min), "min=")
            }
            _ => return Err(self.expected("'=', '+=', 'max=' or 'min='")),
        };
        self.bump();
        let body = self.expr()?;
        let mut bounds = vec![];
        if self.is_keyword("where") {
            self.bump();
            loop {
                bounds.push(self.bound()?);
                if self.eat(",").is_none() {
                    break;
                }
            }
        }
        if !self.at_end_of_statement() {
            return Err(self.expected(if bounds.is_empty() {
                "an operator, 'where' or the end of the statement"
            } else {
                "',' or the end of the statement"
            }));
        }
        Ok(Stmt::Compute(ComputeStmt {
            name,
            pos,
            lhs,
            reduce,
            op,
            op_pos,
            body,
            bounds,
        }))
    }

    /// `v < N` or `0 <= v < N`.
    fn bound(&mut self) -> Result<Bound, ParseError> {
        if let Tok::Num { int, .. } = self.peek() {
            if *int != Some(0) {
                return Err(self.expected("a variable name, or '0 <= v < N'"));
            }
            self.bump();
            self.expect("<=", "'<=' (as in '0 <= v < N')")?;
        }
        let (var, pos) = self.ident("a variable name")?;
        self.expect("<", "'<' (extents are written 'v < N')")?;
        let extent = self.extent()?;
        Ok(Bound { var, pos, extent })
    }

    fn expr(&mut self) -> Result<Node, ParseError> {
        if self.nesting >= MAX_NESTING {
            let msg = format!("brackets and parentheses nest too deeply (at most {MAX_NESTING})");
            return Err(ParseError::at(
                self.src,
                self.offset(),
                "less nesting",
                describe(self.peek()),
                Some(msg),
            ));
        }
        self.nesting += 1;
        let r = self.or();
        self.nesting -= 1;
        r
    }

    fn or(&mut self) -> Result<Node, ParseError> {
        let mut l = self.and()?;
        while let Some(p) = self.eat("||") {
            let r = self.and()?;
            l = self.node(NodeKind::Or(Box::new(l), Box::new(r)), p)?;
        }
        Ok(l)
    }

    fn and(&mut self) -> Result<Node, ParseError> {
        let mut l = self.not()?;
        while let Some(p) = self.eat("&&") {
            let r = self.not()?;
            l = self.node(NodeKind::And(Box::new(l), Box::new(r)), p)?;
        }
        Ok(l)
    }

    /// `!` negates a condition, so it binds looser than a comparison: `!i < 2` is `!(i < 2)`.
    /// Prefix operators are counted rather than recursed on, so they cannot blow the stack.
    fn not(&mut self) -> Result<Node, ParseError> {
        let mut bangs = vec![];
        while let Some(p) = self.eat("!") {
            bangs.push(p);
        }
        let mut n = self.cmp()?;
        for p in bangs.into_iter().rev() {
            n = self.node(NodeKind::Not(Box::new(n)), p)?;
        }
        Ok(n)
    }

    fn cmp_op(&self) -> Option<CmpOp> {
        match self.peek() {
            Tok::Sym("<") => Some(CmpOp::Lt),
            Tok::Sym("<=") => Some(CmpOp::Le),
            Tok::Sym(">") => Some(CmpOp::Gt),
            Tok::Sym(">=") => Some(CmpOp::Ge),
            Tok::Sym("==") => Some(CmpOp::Eq),
            Tok::Sym("!=") => Some(CmpOp::Ne),
            _ => None,
        }
    }

    fn cmp(&mut self) -> Result<Node, ParseError> {
        let l = self.sum()?;
        let Some(op) = self.cmp_op() else {
            return Ok(l);
        };
        let p = self.offset();
        self.bump();
        let r = self.sum()?;
        let n = self.node(NodeKind::Cmp(op, Box::new(l), Box::new(r)), p)?;
        if self.cmp_op().is_some() {
            let msg = "comparisons do not chain: write 'a < b && b < c'".to_string();
            return Err(ParseError::at(
                self.src,
                self.offset(),
                "'&&'",
                describe(self.peek()),
                Some(msg),
            ));
        }
        Ok(n)
    }

    fn sum(&mut self) -> Result<Node, ParseError> {
        let mut l = self.prod()?;
        loop {
            let op = match self.peek() {
                Tok::Sym("+") => BinaryOp::Add,
                Tok::Sym("-") => BinaryOp::Sub,
                _ => return Ok(l),
            };
            let p = self.offset();
            self.bump();
            let r = self.prod()?;
            l = self.node(NodeKind::Bin(op, Box::new(l), Box::new(r)), p)?;
        }
    }

    fn prod(&mut self) -> Result<Node, ParseError> {
        let mut l = self.unary()?;
        loop {
            let op = match self.peek() {
                Tok::Sym("*") => BinaryOp::Mul,
                Tok::Sym("/") => BinaryOp::Div,
                _ => return Ok(l),
            };
            let p = self.offset();
            self.bump();
            let r = self.unary()?;
            l = self.node(NodeKind::Bin(op, Box::new(l), Box::new(r)), p)?;
        }
    }

    fn unary(&mut self) -> Result<Node, ParseError> {
        let mut minus = vec![];
        while let Some(p) = self.eat("-") {
            minus.push(p);
        }
        let mut n = self.primary()?;
        for p in minus.into_iter().rev() {
            n = self.node(NodeKind::Neg(Box::new(n)), p)?;
        }
        Ok(n)
    }

    fn primary(&mut self) -> Result<Node, ParseError> {
        let p = self.offset();
        match self.peek().clone() {
            Tok::Num { text, value, int } => {
                self.bump();
                self.node(NodeKind::Num { text, value, int }, p)
            }
            Tok::Ident(name) if name != "where" => {
                self.bump();
                if self.eat("[").is_some() {
                    let args = self.args("]", false)?;
                    self.node(NodeKind::Read(name, args), p)
                } else if self.eat("(").is_some() {
                    let args = self.args(")", true)?;
                    self.node(NodeKind::Call(name, args), p)
                } else {
                    self.node(NodeKind::Var(name), p)
                }
            }
            Tok::Sym("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect(")", "')'")?;
                Ok(e)
            }
            _ => Err(self.expected("a value (a number, a variable, a tensor read, a call or '(')")),
        }
    }

    /// Comma-separated expressions up to `close`, which is consumed.
    fn args(&mut self, close: &'static str, allow_empty: bool) -> Result<Vec<Node>, ParseError> {
        let mut v = vec![];
        if allow_empty && self.eat(close).is_some() {
            return Ok(v);
        }
        loop {
            v.push(self.expr()?);
            if self.eat(",").is_some() {
                continue;
            }
            self.expect(close, &format!("',' or '{close}'"))?;
            return Ok(v);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lowering

struct Tensor {
    name: String,
    /// Offset of the first mention: orders the inputs, and locates errors about the tensor.
    first: usize,
    kind: TensorKind,
}

enum TensorKind {
    Input {
        shape: Vec<i64>,
    },
    /// Read but never defined or declared: `hi` is the largest index read in each dimension.
    Inferred {
        hi: Vec<i64>,
    },
    /// Loads in the stage's body name tensors by their index in `Lowering::tensors`; they are
    /// renumbered to stage indices once all inputs are known.
    Compute(Stage),
}

struct Lowering<'a> {
    src: &'a str,
    tensors: Vec<Tensor>,
    by_name: HashMap<String, usize>,
    /// Every compute statement's output, `(statement number, offset)`: tells a tensor defined
    /// later apart from an input.
    computed: HashMap<String, (usize, usize)>,
    /// The statement being lowered.
    stmt: usize,
    axes: HashMap<String, usize>,
    ext: Vec<i64>,
    /// Conditions of the enclosing selects' then-branches: they bound the reads below them.
    guards: Vec<Cond>,
}

fn lower(src: &str, stmts: &[Stmt]) -> Result<ComputeDag, ParseError> {
    let mut lw = Lowering {
        src,
        tensors: vec![],
        by_name: HashMap::new(),
        computed: HashMap::new(),
        stmt: 0,
        axes: HashMap::new(),
        ext: vec![],
        guards: vec![],
    };
    // Names first: every tensor is defined once, and declared inputs are known before any
    // statement reads them.
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (si, s) in stmts.iter().enumerate() {
        let (name, pos) = s.name_pos();
        if let Some(&prev) = seen.get(name) {
            let (l, c) = line_col(src, prev);
            let msg =
                format!("'{name}' is already defined at {l}:{c}; each tensor is defined once");
            return Err(ParseError::at(
                src,
                pos,
                "a new tensor name",
                format!("'{name}'"),
                Some(msg),
            ));
        }
        seen.insert(name, pos);
        match s {
            Stmt::Input(d) => lw.add(
                name,
                pos,
                TensorKind::Input {
                    shape: d.shape.clone(),
                },
            ),
            Stmt::Compute(_) => {
                lw.computed.insert(name.into(), (si, pos));
            }
        }
    }
    for (si, s) in stmts.iter().enumerate() {
        if let Stmt::Compute(c) = s {
            lw.stmt = si;
            let stage = lw.statement(c)?;
            lw.add(&c.name, c.pos, TensorKind::Compute(stage));
        }
    }
    lw.finish()
}

/// Names of variables (in order of appearance) and of tensors read, in `n`.
fn collect_names<'n>(n: &'n Node, vars: &mut Vec<(&'n str, usize)>, reads: &mut Vec<&'n str>) {
    match &n.kind {
        NodeKind::Var(v) => vars.push((v, n.pos)),
        NodeKind::Read(t, _) => reads.push(t),
        _ => {}
    }
    for c in n.kind.children() {
        collect_names(c, vars, reads);
    }
}

fn unary_fn(f: &str) -> Option<UnaryOp> {
    Some(match f {
        "exp" => UnaryOp::Exp,
        "log" => UnaryOp::Log,
        "sqrt" => UnaryOp::Sqrt,
        "rsqrt" => UnaryOp::Rsqrt,
        "tanh" => UnaryOp::Tanh,
        "sigmoid" => UnaryOp::Sigmoid,
        "abs" => UnaryOp::Abs,
        "relu" => UnaryOp::Relu,
        _ => return None,
    })
}

impl Lowering<'_> {
    fn add(&mut self, name: &str, first: usize, kind: TensorKind) {
        self.by_name.insert(name.into(), self.tensors.len());
        self.tensors.push(Tensor {
            name: name.into(),
            first,
            kind,
        });
    }

    fn err(
        &self,
        pos: usize,
        expected: impl Into<String>,
        found: impl Into<String>,
        msg: String,
    ) -> ParseError {
        ParseError::at(self.src, pos, expected, found, Some(msg))
    }

    fn statement(&mut self, c: &ComputeStmt) -> Result<Stage, ParseError> {
        // The left-hand variables are the space axes, in order.
        let mut vars: Vec<(&str, usize)> = vec![];
        for (v, p) in &c.lhs {
            if vars.iter().any(|(n, _)| n == v) {
                let msg = format!("variable '{v}' appears twice on the left-hand side");
                return Err(self.err(*p, "a distinct variable", format!("'{v}'"), msg));
            }
            vars.push((v, *p));
        }
        let n_space = vars.len();
        // The others, in order of first appearance, are the reduction axes.
        let (mut rhs, mut reads) = (vec![], vec![]);
        collect_names(&c.body, &mut rhs, &mut reads);
        for (v, p) in rhs {
            if !vars.iter().any(|(n, _)| *n == v) {
                vars.push((v, p));
            }
        }
        let mut extent: HashMap<&str, i64> = HashMap::new();
        for b in &c.bounds {
            if !vars.iter().any(|(n, _)| *n == b.var) {
                let msg = format!("variable '{}' is not used in this statement", b.var);
                return Err(self.err(
                    b.pos,
                    "a variable of this statement",
                    format!("'{}'", b.var),
                    msg,
                ));
            }
            if extent.insert(&b.var, b.extent).is_some() {
                let msg = format!("variable '{}' has two extents in the where clause", b.var);
                return Err(self.err(
                    b.pos,
                    "one extent per variable",
                    format!("'{}'", b.var),
                    msg,
                ));
            }
        }
        for &(v, p) in &vars {
            if !extent.contains_key(v) {
                let is_tensor = self.by_name.contains_key(v)
                    || self.computed.contains_key(v)
                    || reads.contains(&v);
                let msg = if is_tensor {
                    format!("'{v}' is a tensor: read it with indices, as in '{v}[...]'")
                } else {
                    format!("no extent for variable '{v}': add '{v} < N' to the where clause")
                };
                return Err(self.err(
                    p,
                    format!("an extent for variable '{v}'"),
                    format!("'{v}'"),
                    msg,
                ));
            }
        }
        if c.reduce.is_none() && vars.len() > n_space {
            let (v, p) = vars[n_space];
            let msg = format!(
                "variable '{v}' is not on the left-hand side: with '=' every variable indexes \
                 the output (use '+=', 'max=' or 'min=' to reduce over '{v}')"
            );
            return Err(self.err(p, "a variable of the left-hand side", format!("'{v}'"), msg));
        }
        if c.reduce.is_some() && vars.len() == n_space {
            let msg = format!(
                "'{}' reduces over the variables that are not on the left-hand side, \
                 but there are none: use '='",
                c.op
            );
            return Err(self.err(c.op_pos, "a reduction variable", "none", msg));
        }
        let ext: Vec<i64> = vars.iter().map(|(v, _)| extent[v]).collect();
        if ext
            .iter()
            .try_fold(1i64, |acc, &e| {
                acc.checked_mul(e).filter(|&p| p <= MAX_POINTS)
            })
            .is_none()
        {
            let msg =
                "this statement's iteration space is too large (at most 2^40 points)".to_string();
            return Err(self.err(c.pos, "a smaller iteration space", "a larger one", msg));
        }
        self.axes = vars
            .iter()
            .enumerate()
            .map(|(i, (v, _))| (v.to_string(), i))
            .collect();
        self.ext = ext.clone();
        self.guards.clear();
        let body = self.value(&c.body)?;
        let axis = |i: usize| Axis {
            name: vars[i].0.into(),
            extent: ext[i],
        };
        Ok(Stage {
            name: c.name.clone(),
            shape: ext[..n_space].to_vec(),
            dtype: DType::F32,
            kind: StageKind::Compute {
                space: (0..n_space).map(axis).collect(),
                reduce_axes: (n_space..vars.len()).map(axis).collect(),
                reduce: c.reduce,
                body,
            },
        })
    }

    /// A value expression. Index arithmetic in value position (`i`, `2*i - j`) becomes one
    /// `Expr::Index`, integer constant arithmetic a constant.
    fn value(&mut self, n: &Node) -> Result<Expr, ParseError> {
        if let Ok(a) = self.index(n) {
            return Ok(if a.terms.is_empty() {
                Expr::Const(a.offset as f64)
            } else {
                Expr::Index(a)
            });
        }
        Ok(match &n.kind {
            NodeKind::Num { value, .. } => Expr::Const(*value),
            NodeKind::Var(_) => Expr::Index(self.index(n)?),
            NodeKind::Read(t, args) => self.read(t, n.pos, args)?,
            NodeKind::Call(f, args) => self.call(f, n.pos, args)?,
            NodeKind::Neg(x) => match self.value(x)? {
                Expr::Const(c) => Expr::Const(-c),
                e => Expr::unary(UnaryOp::Neg, e),
            },
            NodeKind::Bin(op, a, b) => Expr::binary(*op, self.value(a)?, self.value(b)?),
            NodeKind::Cmp(..) | NodeKind::And(..) | NodeKind::Or(..) | NodeKind::Not(_) => {
                let msg = "expected a value, found a condition: conditions only appear as the \
                           first argument of select(cond, a, b)"
                    .to_string();
                return Err(self.err(n.start, "a value", "a condition", msg));
            }
        })
    }

    /// A condition: comparisons of two affine sides compare indices, others compare values.
    fn cond(&mut self, n: &Node) -> Result<Cond, ParseError> {
        Ok(match &n.kind {
            NodeKind::Cmp(op, a, b) => match (self.index(a), self.index(b)) {
                (Ok(x), Ok(y)) => Cond::Index(*op, x, y),
                _ => Cond::Value(*op, Box::new(self.value(a)?), Box::new(self.value(b)?)),
            },
            NodeKind::And(a, b) => Cond::And(Box::new(self.cond(a)?), Box::new(self.cond(b)?)),
            NodeKind::Or(a, b) => Cond::Or(Box::new(self.cond(a)?), Box::new(self.cond(b)?)),
            NodeKind::Not(a) => Cond::Not(Box::new(self.cond(a)?)),
            _ => {
                let msg = "expected a condition (a comparison such as 'h >= 1'), found a value"
                    .to_string();
                return Err(self.err(n.start, "a condition", "a value", msg));
            }
        })
    }

    /// An affine index expression over the statement's axes.
    fn index(&self, n: &Node) -> Result<Affine, ParseError> {
        let not_affine = |why: String| {
            let msg = format!(
                "index expressions must be affine (integers, variables, '+', '-', and '*' by an \
                 integer constant): {why}"
            );
            self.err(n.pos, "an affine index expression", why, msg)
        };
        let a = match &n.kind {
            NodeKind::Num { int: Some(v), .. } => Affine::constant(*v),
            NodeKind::Num { text, .. } => {
                return Err(not_affine(format!("'{text}' is not an integer")));
            }
            NodeKind::Var(v) => match self.axes.get(v) {
                Some(&x) => Affine::axis(x),
                None => {
                    let msg =
                        format!("no extent for variable '{v}': add '{v} < N' to the where clause");
                    return Err(self.err(
                        n.pos,
                        format!("an extent for variable '{v}'"),
                        format!("'{v}'"),
                        msg,
                    ));
                }
            },
            NodeKind::Neg(x) => self.index(x)?.scale(-1),
            NodeKind::Bin(BinaryOp::Add, a, b) => self.index(a)?.add(&self.index(b)?),
            NodeKind::Bin(BinaryOp::Sub, a, b) => self.index(a)?.add(&self.index(b)?.scale(-1)),
            NodeKind::Bin(BinaryOp::Mul, a, b) => {
                let (x, y) = (self.index(a)?, self.index(b)?);
                if x.terms.is_empty() {
                    y.scale(x.offset)
                } else if y.terms.is_empty() {
                    x.scale(y.offset)
                } else {
                    return Err(not_affine("'*' multiplies two variables".into()));
                }
            }
            NodeKind::Bin(_, _, _) => {
                return Err(not_affine("'/' is not allowed in an index".into()));
            }
            NodeKind::Read(t, _) => return Err(not_affine(format!("it reads tensor '{t}'"))),
            NodeKind::Call(f, _) => return Err(not_affine(format!("it calls '{f}'"))),
            NodeKind::Cmp(..) | NodeKind::And(..) | NodeKind::Or(..) | NodeKind::Not(_) => {
                return Err(ParseError::at(
                    self.src,
                    n.pos,
                    "an index expression",
                    "a condition",
                    None,
                ));
            }
        };
        // Checked at every node, so the arithmetic above never sees operands that overflow.
        if a.offset.abs() > MAX_INDEX_INT || a.terms.iter().any(|t| t.1.abs() > MAX_INDEX_INT) {
            let msg = "index constants and coefficients must stay within ±16777216".to_string();
            return Err(self.err(n.pos, "smaller index constants", "a larger one", msg));
        }
        Ok(a)
    }

    fn call(&mut self, f: &str, pos: usize, args: &[Node]) -> Result<Expr, ParseError> {
        let arity = match f {
            "select" => 3,
            "max" | "min" => 2,
            _ if unary_fn(f).is_some() => 1,
            _ => {
                let msg = format!("unknown function '{f}' (functions: {FUNCTIONS})");
                return Err(self.err(pos, "a function name", format!("'{f}'"), msg));
            }
        };
        if args.len() != arity {
            let plural = if arity == 1 { "" } else { "s" };
            let msg = format!("'{f}' takes {arity} argument{plural}, found {}", args.len());
            return Err(self.err(
                pos,
                format!("{arity} argument{plural}"),
                args.len().to_string(),
                msg,
            ));
        }
        Ok(match f {
            "select" => {
                let c = self.cond(&args[0])?;
                // Reads in the then-branch only happen where the condition holds.
                self.guards.push(c.clone());
                let a = self.value(&args[1]);
                self.guards.pop();
                Expr::select(c, a?, self.value(&args[2])?)
            }
            "max" => Expr::binary(BinaryOp::Max, self.value(&args[0])?, self.value(&args[1])?),
            "min" => Expr::binary(BinaryOp::Min, self.value(&args[0])?, self.value(&args[1])?),
            _ => Expr::unary(
                unary_fn(f).expect("arity checked above"),
                self.value(&args[0])?,
            ),
        })
    }

    /// The tensor a read names: earlier-defined, declared, or a new inferred input.
    fn resolve(&mut self, name: &str, pos: usize, dims: usize) -> Result<usize, ParseError> {
        if let Some(&t) = self.by_name.get(name) {
            self.tensors[t].first = self.tensors[t].first.min(pos);
            return Ok(t);
        }
        if let Some(&(si, def)) = self.computed.get(name) {
            let msg = if si == self.stmt {
                format!(
                    "this statement reads '{name}', the tensor it defines; a statement can only \
                     read tensors defined before it"
                )
            } else {
                let (l, _) = line_col(self.src, def);
                format!(
                    "'{name}' is defined by a later statement (line {l}); a statement can only \
                     read tensors defined before it"
                )
            };
            return Err(self.err(
                pos,
                "a tensor defined before this statement",
                format!("'{name}'"),
                msg,
            ));
        }
        self.add(name, pos, TensorKind::Inferred { hi: vec![0; dims] });
        Ok(self.tensors.len() - 1)
    }

    fn read(&mut self, name: &str, pos: usize, args: &[Node]) -> Result<Expr, ParseError> {
        let t = self.resolve(name, pos, args.len())?;
        let idx = args
            .iter()
            .map(|a| self.index(a))
            .collect::<Result<Vec<_>, _>>()?;
        let dims = match &self.tensors[t].kind {
            TensorKind::Input { shape } | TensorKind::Compute(Stage { shape, .. }) => shape.len(),
            TensorKind::Inferred { hi } => hi.len(),
        };
        if dims != idx.len() {
            let plural = if dims == 1 { "" } else { "s" };
            let msg = format!(
                "'{name}' has {dims} dimension{plural} but is read with {} indices",
                idx.len()
            );
            return Err(self.err(pos, format!("{dims} indices"), idx.len().to_string(), msg));
        }
        // The same range function `ComputeDag::new` checks with, so what is inferred here
        // always validates.
        for (d, a) in idx.iter().enumerate() {
            let (lo, hi) = guarded_range(a, &self.ext, &self.guards);
            let p = args[d].start;
            let found = format!("index range [{lo}, {hi}]");
            match &mut self.tensors[t].kind {
                TensorKind::Inferred { hi: top } if lo >= 0 => top[d] = top[d].max(hi),
                TensorKind::Inferred { .. } => {
                    let msg = format!(
                        "input '{name}' is read at a negative index in dimension {d} ({found}): \
                         inputs start at 0; guard the read with select(...)"
                    );
                    return Err(self.err(p, "a non-negative index", found, msg));
                }
                TensorKind::Input { shape } | TensorKind::Compute(Stage { shape, .. }) => {
                    let extent = shape[d];
                    if lo < 0 || hi >= extent {
                        let msg = format!(
                            "reads '{name}' out of bounds in dimension {d}: \
                             {found} for extent {extent}"
                        );
                        return Err(self.err(p, format!("an index in [0, {extent})"), found, msg));
                    }
                }
            }
        }
        Ok(Expr::Load(t, idx))
    }

    fn finish(self) -> Result<ComputeDag, ParseError> {
        let src = self.src;
        if !self
            .tensors
            .iter()
            .any(|t| matches!(t.kind, TensorKind::Compute(_)))
        {
            return Err(ParseError::at(
                src,
                src.len(),
                "a statement that computes a tensor",
                "only input declarations",
                None,
            ));
        }
        let (mut order, computes): (Vec<usize>, Vec<usize>) = (0..self.tensors.len())
            .partition(|&t| !matches!(self.tensors[t].kind, TensorKind::Compute(_)));
        order.sort_by_key(|&t| self.tensors[t].first);
        order.extend(computes);
        let mut remap = vec![0; self.tensors.len()];
        for (stage, &t) in order.iter().enumerate() {
            remap[t] = stage;
        }
        let positions: HashMap<String, usize> = self
            .tensors
            .iter()
            .map(|t| (t.name.clone(), t.first))
            .collect();
        let mut tensors: Vec<Option<Tensor>> = self.tensors.into_iter().map(Some).collect();
        let mut stages = vec![];
        for t in order {
            let Tensor { name, first, kind } =
                tensors[t].take().expect("each tensor is placed once");
            let input = |shape: Vec<i64>| Stage {
                name: name.clone(),
                shape,
                dtype: DType::F32,
                kind: StageKind::Placeholder,
            };
            stages.push(match kind {
                TensorKind::Input { shape } => input(shape),
                TensorKind::Inferred { hi } => {
                    let shape: Vec<i64> = hi.iter().map(|h| h + 1).collect();
                    if shape
                        .iter()
                        .try_fold(1i64, |acc, &e| {
                            acc.checked_mul(e).filter(|&p| p <= MAX_POINTS)
                        })
                        .is_none()
                    {
                        let msg = format!(
                            "input '{name}' would have more than 2^40 elements (shape {shape:?})"
                        );
                        return Err(ParseError::at(
                            src,
                            first,
                            "a smaller input",
                            format!("shape {shape:?}"),
                            Some(msg),
                        ));
                    }
                    input(shape)
                }
                TensorKind::Compute(mut stage) => {
                    if let StageKind::Compute { body, .. } = &mut stage.kind {
                        *body = body.map_loads(&mut |t, idx| Expr::Load(remap[t], idx.to_vec()));
                    }
                    stage
                }
            });
        }
        // The checks above mirror `ComputeDag::new`, so this should not fail; if it does, point
        // at the stage it names.
        ComputeDag::new(stages).map_err(|e| {
            let pos = match &e {
                DagError::Invalid { stage, .. } => positions.get(stage).copied().unwrap_or(0),
                DagError::Empty => src.len(),
            };
            ParseError::at(
                src,
                pos,
                "a valid operator",
                e.to_string(),
                Some(format!("invalid operator: {e}")),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};

    const MATMUL: &str = "C[i,j] += A[i,k] * B[k,j] where i<512, j<512, k<512";

    const CONV: &str = "
# explicit padding stage, then the convolution
P[n,c,h,w] = select(h >= 1 && h < 57 && w >= 1 && w < 57, X[n,c,h-1,w-1], 0.0) where n<1, c<8, h<58, w<58
O[n,f,y,x] += P[n,c,y+ry,x+rx] * W[f,c,ry,rx] where n<1, f<8, y<56, x<56, c<8, ry<3, rx<3
";

    const SOFTMAX: &str = "
M[i] max= X[i,k] where i<64, k<128
E[i,j] = exp(X[i,j] - M[i]) where i<64, j<128
S[i] += E[i,k] where i<64, k<128
Y[i,j] = E[i,j] / S[i] where i<64, j<128
";

    fn conv_ref() -> ComputeDag {
        let win = ops::Window {
            kh: 3,
            kw: 3,
            stride: 1,
            pad: 1,
            dilation: 1,
        };
        ops::conv2d_nchw(1, 8, 56, 56, 8, win, false, false).unwrap()
    }

    fn shapes(d: &ComputeDag) -> Vec<Vec<i64>> {
        d.stages.iter().map(|s| s.shape.clone()).collect()
    }

    fn err(src: &str) -> ParseError {
        parse(src).expect_err("should not parse")
    }

    #[test]
    fn matmul_matches_library() {
        let d = parse(MATMUL).unwrap();
        assert_eq!(
            d.workload_key(),
            ops::matmul(512, 512, 512).unwrap().workload_key()
        );
        assert_eq!(
            d.stages.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["A", "B", "C"]
        );
        assert_eq!(d.stages[2].reduce_axes()[0].name, "k");
        // Declaring the inputs changes nothing.
        let declared = format!("input A[512, 512]; input B[512,512]\n{MATMUL}");
        assert_eq!(parse(&declared).unwrap().workload_key(), d.workload_key());
    }

    #[test]
    fn conv_example_parses_and_matches_library() {
        let d = parse(CONV).unwrap();
        let r = conv_ref();
        assert_eq!(
            d.stages[d.stage_by_name("X").unwrap()].shape,
            [1, 8, 56, 56]
        );
        assert_eq!(shapes(&d), shapes(&r));
        assert_eq!(d.flop_count(), r.flop_count());
        // The library's guard is `0 <= h-1 < 56` grouped per dimension; written the same way,
        // the text form gives the very same workload key.
        let same = CONV.replace(
            "h >= 1 && h < 57 && w >= 1 && w < 57",
            "(h-1 >= 0 && h-1 < 56) && (w-1 >= 0 && w-1 < 56)",
        );
        assert_eq!(parse(&same).unwrap().workload_key(), r.workload_key());
    }

    #[test]
    fn padding_guard_fused_into_a_reduction_bounds_the_read() {
        // The guard constrains `y+ry-1` itself, not a single variable.
        let src = "O[n,f,y,x] += select(y+ry >= 1 && y+ry < 57 && x+rx-1 >= 0 && x+rx-1 < 56, \
                   X[n,c,y+ry-1,x+rx-1], 0.0) * W[f,c,ry,rx] \
                   where n<1, f<8, y<56, x<56, c<8, ry<3, rx<3";
        let d = parse(src).unwrap();
        assert_eq!(d.stages[0].shape, [1, 8, 56, 56]);
        // Without the guard the read goes negative.
        let e = err("O[y] += X[y+ry-1] where y<56, ry<3");
        assert!(e.message.contains("negative index"), "{e}");
        assert_eq!(e.col, 11, "points at the start of the index expression");
    }

    #[test]
    fn softmax_matches_library() {
        let d = parse(SOFTMAX).unwrap();
        let r = ops::softmax(64, 128).unwrap();
        assert_eq!(d.flop_count(), r.flop_count());
        assert_eq!(d.workload_key(), r.workload_key());
    }

    #[test]
    fn expressions_lower_as_documented() {
        let src = "Y[i] = -X[i] * 2 + relu(i - 1) - max(X[i], 1e-3) \
                   / select(X[i] > 0.5 || !(i < 2), 1, -0.5) where i<8";
        let d = parse(src).unwrap();
        let StageKind::Compute { body, .. } = &d.stages[1].kind else {
            panic!()
        };
        let x = || Expr::Load(0, vec![Affine::axis(0)]);
        let cond = Cond::Or(
            Box::new(Cond::Value(
                CmpOp::Gt,
                Box::new(x()),
                Box::new(Expr::Const(0.5)),
            )),
            Box::new(Cond::Not(Box::new(Cond::Index(
                CmpOp::Lt,
                Affine::axis(0),
                Affine::constant(2),
            )))),
        );
        let want = Expr::binary(
            BinaryOp::Sub,
            Expr::binary(
                BinaryOp::Add,
                Expr::binary(
                    BinaryOp::Mul,
                    Expr::unary(UnaryOp::Neg, x()),
                    Expr::Const(2.0),
                ),
                Expr::unary(UnaryOp::Relu, Expr::Index(Affine::new(vec![(0, 1)], -1))),
            ),
            Expr::binary(
                BinaryOp::Div,
                Expr::binary(BinaryOp::Max, x(), Expr::Const(1e-3)),
                Expr::select(cond, Expr::Const(1.0), Expr::Const(-0.5)),
            ),
        );
        assert_eq!(body, &want);
    }

    #[test]
    fn statements_separate_on_semicolons_and_newlines_outside_brackets() {
        let src = "T[i] = A[i,\n 0] + 1 ; U[i] = T[i] where i<4 # comment\n\n  ; \r\n";
        let e = err(src);
        // `T` has no where clause, and its `i` has no extent.
        assert_eq!((e.line, e.col), (1, 3));
        let d = parse("T[i] = A[i,\n 0] + 1 where i<4; U[i] = T[i] where 0 <= i < 4 # c\n\n ;\r\n")
            .unwrap();
        assert_eq!(shapes(&d), [vec![4, 1], vec![4], vec![4]]);
    }

    #[test]
    fn missing_bracket_reports_position_and_expectation() {
        let e = err("input A[4, 4]\nC[i, j += A[i, j] where i<4, j<4");
        assert_eq!((e.line, e.col, e.offset), (2, 8, 21));
        assert_eq!(e.expected, "',' or ']'");
        assert_eq!(e.found, "'+='");
        assert_eq!(e.to_string(), "2:8: expected ',' or ']', found '+='");
        let e = err("C[i] = A[i where i<4");
        assert!(e.expected.contains("']'"), "{e}");
        assert_eq!(e.found, "'where'");
    }

    #[test]
    fn missing_extent_names_the_variable() {
        let e = err("C[i,j] += A[i,k] * B[k,j] where i<4, j<4");
        assert_eq!(
            e.message,
            "no extent for variable 'k': add 'k < N' to the where clause"
        );
        assert_eq!((e.line, e.col), (1, 15));
        for src in [
            "input A[4]\nC[i] = A + 1 where i<4",
            "C[i] = A[i] + A where i<4",
        ] {
            let e = err(src);
            assert!(e.message.contains("'A' is a tensor"), "{src}: {e}");
        }
    }

    #[test]
    fn non_affine_indices_are_rejected() {
        for src in [
            "C[i] += A[i*j] where i<4, j<4",
            "C[i] = A[i/2] where i<4",
            "C[i] = A[0.5] where i<4",
        ] {
            let e = err(src);
            assert!(
                e.message.contains("index expressions must be affine"),
                "{src}: {e}"
            );
        }
        assert_eq!(err("C[i] += A[i*j] where i<4, j<4").col, 12);
        // Multiplying by a constant, on either side, is affine.
        let d = parse("C[i] = A[2*i + i*3 - (1 - 2)] where i<4").unwrap();
        assert_eq!(d.stages[0].shape, [17]);
    }

    #[test]
    fn redefinition_is_rejected() {
        let e = err("A[i] = 1.0 where i<4\nA[i] = 2.0 where i<4");
        assert!(e.message.contains("'A' is already defined at 1:1"), "{e}");
        assert_eq!((e.line, e.col), (2, 1));
        assert!(
            err("input A[4]\nA[i] = 2.0 where i<4")
                .message
                .contains("already defined")
        );
    }

    #[test]
    fn reading_a_later_or_own_output_is_rejected() {
        let e = err("B[i] = A[i] + 1 where i<4\nA[i] = X[i] where i<4");
        assert!(
            e.message
                .contains("'A' is defined by a later statement (line 2)"),
            "{e}"
        );
        assert_eq!((e.line, e.col), (1, 8));
        let e = err("C[i] = C[i] + 1 where i<4");
        assert!(e.message.contains("the tensor it defines"), "{e}");
    }

    #[test]
    fn empty_input_is_an_error() {
        for src in ["", "  \n# only a comment\n ; "] {
            let e = err(src);
            assert_eq!(e.found, "end of input", "{src:?}");
            assert!(e.expected.contains("a statement"));
        }
        assert!(err("input A[4]").expected.contains("computes"));
    }

    #[test]
    fn reduction_operator_must_match_the_variables() {
        let e = err("C[i] = A[i,k] where i<4, k<4");
        assert!(
            e.message
                .contains("variable 'k' is not on the left-hand side"),
            "{e}"
        );
        assert_eq!(e.col, 12);
        let e = err("C[i] max= A[i] where i<4");
        assert!(e.message.contains("'max=' reduces over"), "{e}");
        assert_eq!(e.col, 6);
        assert!(parse("C[i] min= A[i,k] where i<4, k<2").unwrap().stages[1].is_reduction());
    }

    #[test]
    fn other_semantic_errors() {
        let cases = [
            ("C[i,i] = 1.0 where i<4", "appears twice"),
            ("C[i] = 1.0 where i<4, i<5", "two extents"),
            ("C[i] = 1.0 where i<4, q<5", "'q' is not used"),
            ("C[i] = A[i-1] where i<4", "negative index"),
            ("input A[3]\nC[i] = A[i] where i<4", "out of bounds"),
            (
                "input A[4]\nC[i] = A[i, i] where i<4",
                "has 1 dimension but is read with 2",
            ),
            ("C[i] = foo(i) where i<4", "unknown function 'foo'"),
            ("C[i] = exp(i, i) where i<4", "takes 1 argument"),
            (
                "C[i] = A[i] < 1 where i<4",
                "expected a value, found a condition",
            ),
            (
                "C[i] = select(A[i], 1, 2) where i<4",
                "expected a condition",
            ),
            ("C[i] = A[i] where i < 4 < 5", "expected ',' or the end"),
            ("C[i] = 1.0 where i<0", "positive integer extent"),
            ("C[i] = A[i] where 1 <= i < 4", "'0 <= v < N'"),
            ("C[i] = select(0 < i < 2, 1, 2) where i<4", "do not chain"),
            ("C[i] = A[i] @ 2", "found '@'"),
            ("C[i] = A[i] & 2", "expected '&&'"),
            ("C[i] = 1e where i<4", "exponent"),
            ("C[i] = 1e999 where i<4", "finite"),
            ("C[i] = A[i * 99999999] where i<4", "within"),
        ];
        for (src, want) in cases {
            let e = err(src);
            assert!(e.to_string().contains(want), "{src}: {e}");
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("C[i] = {}1{} where i<2", "(".repeat(1000), ")".repeat(1000));
        assert!(err(&deep).message.contains("nest too deeply"));
        let long = format!("C[i] = {} where i<2", vec!["1"; 1000].join(" + "));
        assert!(err(&long).message.contains("too deep"));
        let minus = format!("C[i] = {}1 where i<2", "-".repeat(100_000));
        assert!(err(&minus).message.contains("too deep"));
    }

    /// A random well-formed program, rendered with either of two naming and spacing styles.
    fn random_program(seed: u64, style: usize) -> (String, Vec<i64>) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let tname = |t: usize| {
            [
                ["A", "B", "Z", "Out", "Post"],
                ["in_0", "in_1", "z9", "res", "after"],
            ][style][t]
        };
        let vname = |v: usize| {
            [
                ["i", "j", "k", "r", "s"],
                ["v0", "v_1", "w2", "red_a", "red_b"],
            ][style][v]
        };
        let sp = [" ", "  "][style];
        let (ns, nr) = (rng.gen_range(1..=3), rng.gen_range(0..=2));
        let vars: Vec<usize> = (0..ns).chain(3..3 + nr).collect();
        let ext: Vec<i64> = vars.iter().map(|_| rng.gen_range(1..=6)).collect();
        let arity = [rng.gen_range(1..=3), rng.gen_range(1..=3)];
        fn expr(
            rng: &mut impl Rng,
            depth: u32,
            vars: &[usize],
            arity: [usize; 2],
            t: &dyn Fn(usize) -> &'static str,
            v: &dyn Fn(usize) -> &'static str,
        ) -> String {
            let leaf = depth == 0 || rng.gen_bool(0.3);
            let sub = |rng: &mut _| expr(rng, depth.saturating_sub(1), vars, arity, t, v);
            if leaf {
                return match rng.gen_range(0..4) {
                    0 => ["2", "0.5", "1e-3", "3"][rng.gen_range(0..4)].to_string(),
                    1 => v(vars[rng.gen_range(0..vars.len())]).to_string(),
                    _ => {
                        let which = rng.gen_range(0..2);
                        let idx: Vec<String> = (0..arity[which])
                            .map(|_| {
                                let x = v(vars[rng.gen_range(0..vars.len())]);
                                match rng.gen_range(0..3) {
                                    0 => x.to_string(),
                                    1 => format!(
                                        "{}*{x} + {}",
                                        rng.gen_range(1..3),
                                        rng.gen_range(0..3)
                                    ),
                                    _ => format!("({x} + 1)"),
                                }
                            })
                            .collect();
                        format!("{}[{}]", t(which), idx.join(", "))
                    }
                };
            }
            match rng.gen_range(0..5) {
                0 => format!(
                    "({} {} {})",
                    sub(rng),
                    ["+", "-", "*", "/"][rng.gen_range(0..4)],
                    sub(rng)
                ),
                1 => format!(
                    "{}({})",
                    ["exp", "tanh", "relu", "abs", "sigmoid"][rng.gen_range(0..5)],
                    sub(rng)
                ),
                2 => format!("max({}, {})", sub(rng), sub(rng)),
                3 => format!("-{}", sub(rng)),
                _ => {
                    let x = v(vars[rng.gen_range(0..vars.len())]);
                    format!(
                        "select({x} >= 1 && {} > 0.5, {}, {})",
                        sub(rng),
                        sub(rng),
                        sub(rng)
                    )
                }
            }
        }
        let body = expr(&mut rng, 3, &vars, arity, &tname, &vname);
        // One read of all the variables, so that every reduction variable is used.
        let all: Vec<&str> = vars.iter().map(|&v| vname(v)).collect();
        let op = if nr == 0 {
            "="
        } else {
            ["+=", "max=", "min="][rng.gen_range(0..3)]
        };
        let bounds: Vec<String> = vars
            .iter()
            .zip(&ext)
            .map(|(&v, e)| format!("{}{sp}<{sp}{e}", vname(v)))
            .collect();
        let lhs: Vec<&str> = all[..ns].to_vec();
        let mut text = format!(
            "# generated\n{}[{}]{sp}{op}{sp}{}[{}] * {body} where {}\n",
            tname(3),
            lhs.join(","),
            tname(2),
            all.join(&format!(",{sp}")),
            bounds.join(", ")
        );
        if rng.gen_bool(0.5) {
            text += &format!(
                "{}[{}] = relu({}[{}]) where {};",
                tname(4),
                lhs.join(", "),
                tname(3),
                lhs.join(", "),
                bounds[..ns].join(", ")
            );
        }
        (text, ext[..ns].to_vec())
    }

    #[test]
    fn random_programs_parse() {
        for seed in 0..200 {
            let (text, shape) = random_program(seed, 0);
            let d = parse(&text).unwrap_or_else(|e| panic!("{text}\n{e}"));
            assert_eq!(d.stages.last().unwrap().shape, shape);
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse(&s);
        }

        #[test]
        fn token_soup_never_panics(toks in prop::collection::vec(prop::sample::select(vec![
            "C", "A", "i", "j", "k", "[", "]", "(", ")", ",", ";", "\n", "=", "+=", "max", "min", "*",
            "+", "-", "/", "<", "<=", ">=", "==", "!=", "&&", "||", "!", "where", "input", "select",
            "exp", "0", "1", "4", "0.5", "1e-3", "99999999999", "#c\n",
        ]), 0..40)) {
            let _ = parse(&toks.join(" "));
        }

        /// Names and spacing do not matter: both renderings give one workload key.
        #[test]
        fn names_do_not_change_the_key(seed in any::<u64>()) {
            let (a, shape) = random_program(seed, 0);
            let (b, _) = random_program(seed, 1);
            let (da, db) = (parse(&a).unwrap(), parse(&b).unwrap());
            prop_assert_eq!(da.workload_key(), db.workload_key());
            prop_assert_eq!(da.flop_count(), db.flop_count());
            prop_assert_eq!(&da.stages.last().unwrap().shape, &shape);
        }
    }
}
