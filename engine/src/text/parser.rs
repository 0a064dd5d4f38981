//! The recursive-descent parser: tokens to statements, with the nesting limits that keep a
//! hostile input from exhausting the stack.

use super::error::ParseError;
use super::lexer::{Tok, Token, describe};
use super::syntax::{Bound, ComputeStmt, InputDecl, MAX_INDEX_INT, Node, NodeKind, Stmt};
use crate::ir::{BinaryOp, CmpOp, DType, ReduceOp};

/// The element types a statement may say.
const TYPES: [DType; 4] = [DType::F32, DType::I32, DType::U8, DType::I8];

/// Deepest nesting of brackets and parentheses. The parser recurses on them, so a hostile
/// input must not be able to exhaust the stack.
const MAX_NESTING: usize = 64;

/// Deepest expression tree: every later pass over an `Expr` recurses too.
const MAX_TREE_DEPTH: usize = 256;

pub(super) struct Parser<'a> {
    pub(super) src: &'a str,
    pub(super) toks: Vec<Token>,
    pub(super) pos: usize,
    pub(super) nesting: usize,
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

    pub(super) fn program(&mut self) -> Result<Vec<Stmt>, ParseError> {
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

    /// An element type before a name (`u8 Y[...]`, `input i8 X[...]`), else f32: a type's name
    /// followed by another name (a tensor may still be called `u8`: `u8[i] = ...`).
    fn dtype(&mut self) -> DType {
        let t = match (self.peek(), self.peek2()) {
            (Tok::Ident(t), Tok::Ident(_)) => TYPES.into_iter().find(|d| d.name() == t),
            _ => None,
        };
        if t.is_some() {
            self.bump();
        }
        t.unwrap_or(DType::F32)
    }

    fn statement(&mut self) -> Result<Stmt, ParseError> {
        let dtype = self.dtype();
        let (name, pos) = self.ident("a tensor name, a type or 'input'")?;
        // `input` only starts a declaration when a name follows: `input[i] = ...` defines a
        // tensor called `input`.
        if name == "input" && matches!(self.peek(), Tok::Ident(_)) {
            if dtype != DType::F32 {
                return Err(self.expected("the type after 'input'"));
            }
            let dtype = self.dtype();
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
            return Ok(Stmt::Input(InputDecl {
                name,
                pos,
                shape,
                dtype,
            }));
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
            dtype,
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
