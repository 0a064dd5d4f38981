//! Integer index expressions of the lowered program: linear combinations of atoms (loop
//! variables, region offsets, and the few non-linear forms fusion needs), kept in a canonical
//! form so that constant differences are visible (bound inference unions regions by them) and
//! the printed C stays readable.

use std::fmt::Write;

/// A variable of the lowered program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Var {
    /// The loop of iterator node `node` of stage `stage`.
    Loop { stage: usize, node: usize },
    /// The first index, in dimension `dim`, of the region of an attached stage's buffer.
    Lo { stage: usize, dim: usize },
}

/// A map keyed by variables. Lowering builds several per candidate, thousands of candidates per
/// search round: SipHash's DoS resistance buys nothing on keys the engine made, and cost 7% of
/// a conv2d round.
pub type VarMap<V> = std::collections::HashMap<Var, V, std::hash::BuildHasherDefault<VarHasher>>;

/// Multiply-rotate hashing of the few integers a key holds (the scheme of rustc's FxHasher).
#[derive(Default, Clone, Copy)]
pub struct VarHasher(u64);

impl VarHasher {
    #[inline]
    fn add(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for VarHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.add(u64::from_le_bytes(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.add(x);
    }
    fn write_usize(&mut self, x: usize) {
        self.add(x as u64);
    }
    fn write_isize(&mut self, x: isize) {
        self.add(x as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Atom {
    Var(Var),
    /// Floor division by a positive constant (operands are non-negative where it is used).
    Div(Box<Lin>, i64),
    Mod(Box<Lin>, i64),
    Max(Box<Lin>, Box<Lin>),
    Min(Box<Lin>, Box<Lin>),
}

/// `c + sum(coef * atom)`, terms sorted by atom, no zero coefficients.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lin {
    pub terms: Vec<(Atom, i64)>,
    pub c: i64,
}

impl Lin {
    pub fn constant(c: i64) -> Lin {
        Lin { terms: vec![], c }
    }

    pub fn var(v: Var) -> Lin {
        Lin {
            terms: vec![(Atom::Var(v), 1)],
            c: 0,
        }
    }

    pub fn atom(a: Atom) -> Lin {
        Lin {
            terms: vec![(a, 1)],
            c: 0,
        }
    }

    pub fn as_const(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.c)
    }

    /// The coefficient of the plain term of `v` (0 without one); uses of `v` inside non-linear
    /// atoms are not counted.
    pub fn var_coef(&self, v: Var) -> i64 {
        self.terms
            .iter()
            .filter(|(a, _)| matches!(a, Atom::Var(w) if *w == v))
            .map(|(_, k)| k)
            .sum()
    }

    pub fn add(&self, o: &Lin) -> Lin {
        let mut terms = Vec::with_capacity(self.terms.len() + o.terms.len());
        let (mut i, mut j) = (0, 0);
        while i < self.terms.len() || j < o.terms.len() {
            let take_left =
                j >= o.terms.len() || (i < self.terms.len() && self.terms[i].0 < o.terms[j].0);
            let take_right =
                i >= self.terms.len() || (j < o.terms.len() && o.terms[j].0 < self.terms[i].0);
            if take_left {
                terms.push(self.terms[i].clone());
                i += 1;
            } else if take_right {
                terms.push(o.terms[j].clone());
                j += 1;
            } else {
                let c = self.terms[i].1 + o.terms[j].1;
                if c != 0 {
                    terms.push((self.terms[i].0.clone(), c));
                }
                i += 1;
                j += 1;
            }
        }
        Lin {
            terms,
            c: self.c + o.c,
        }
    }

    pub fn add_const(&self, k: i64) -> Lin {
        Lin {
            terms: self.terms.clone(),
            c: self.c + k,
        }
    }

    pub fn sub(&self, o: &Lin) -> Lin {
        self.add(&o.scale(-1))
    }

    pub fn scale(&self, k: i64) -> Lin {
        if k == 0 {
            return Lin::constant(0);
        }
        Lin {
            terms: self.terms.iter().map(|(a, c)| (a.clone(), c * k)).collect(),
            c: self.c * k,
        }
    }

    /// Floor division of a non-negative value by `d > 0`.
    pub fn div(&self, d: i64) -> Lin {
        if d == 1 {
            return self.clone();
        }
        if let Some(c) = self.as_const() {
            return Lin::constant(c.div_euclid(d));
        }
        if self.terms.iter().all(|(_, c)| c % d == 0) && self.c % d == 0 {
            return Lin {
                terms: self.terms.iter().map(|(a, c)| (a.clone(), c / d)).collect(),
                c: self.c / d,
            };
        }
        Lin::atom(Atom::Div(Box::new(self.clone()), d))
    }

    /// Remainder of a non-negative value by `d > 0`.
    pub fn rem(&self, d: i64) -> Lin {
        if d == 1 {
            return Lin::constant(0);
        }
        if let Some(c) = self.as_const() {
            return Lin::constant(c.rem_euclid(d));
        }
        if self.terms.iter().all(|(_, c)| c % d == 0) {
            return Lin::constant(self.c.rem_euclid(d));
        }
        Lin::atom(Atom::Mod(Box::new(self.clone()), d))
    }

    pub fn maximum(&self, o: &Lin) -> Lin {
        match (self.as_const(), o.as_const()) {
            (Some(a), Some(b)) => Lin::constant(a.max(b)),
            _ if self == o => self.clone(),
            _ => Lin::atom(Atom::Max(Box::new(self.clone()), Box::new(o.clone()))),
        }
    }

    pub fn minimum(&self, o: &Lin) -> Lin {
        match (self.as_const(), o.as_const()) {
            (Some(a), Some(b)) => Lin::constant(a.min(b)),
            _ if self == o => self.clone(),
            _ => Lin::atom(Atom::Min(Box::new(self.clone()), Box::new(o.clone()))),
        }
    }

    /// The expression with variables replaced where `f` gives a replacement (recursively
    /// inside divisions, remainders, minima and maxima), re-canonicalised.
    pub fn substitute(&self, f: &impl Fn(Var) -> Option<Lin>) -> Lin {
        let mut out = Lin::constant(self.c);
        for (a, k) in &self.terms {
            let t = match a {
                Atom::Var(v) => f(*v).unwrap_or_else(|| Lin::var(*v)),
                Atom::Div(x, d) => x.substitute(f).div(*d),
                Atom::Mod(x, d) => x.substitute(f).rem(*d),
                Atom::Max(x, y) => x.substitute(f).maximum(&y.substitute(f)),
                Atom::Min(x, y) => x.substitute(f).minimum(&y.substitute(f)),
            };
            out = out.add(&t.scale(*k));
        }
        out
    }

    /// Inclusive bounds, given the bounds of each variable.
    pub fn range(&self, var: &impl Fn(Var) -> (i64, i64)) -> (i64, i64) {
        let (mut lo, mut hi) = (self.c, self.c);
        for (a, k) in &self.terms {
            let (l, h) = a.range(var);
            if *k >= 0 {
                lo += k * l;
                hi += k * h;
            } else {
                lo += k * h;
                hi += k * l;
            }
        }
        (lo, hi)
    }

    /// Every variable the expression uses.
    pub fn vars(&self, out: &mut Vec<Var>) {
        for (a, _) in &self.terms {
            match a {
                Atom::Var(v) => {
                    if !out.contains(v) {
                        out.push(*v)
                    }
                }
                Atom::Div(x, _) | Atom::Mod(x, _) => x.vars(out),
                Atom::Max(x, y) | Atom::Min(x, y) => {
                    x.vars(out);
                    y.vars(out)
                }
            }
        }
    }

    /// C text, with `name` giving each variable's identifier.
    pub fn to_c(&self, name: &impl Fn(Var) -> String) -> String {
        let mut s = String::new();
        for (a, k) in &self.terms {
            let at = a.to_c(name);
            match (*k, s.is_empty()) {
                (1, true) => s.push_str(&at),
                (1, false) => write!(s, " + {at}").unwrap(),
                (-1, true) => write!(s, "-{at}").unwrap(),
                (-1, false) => write!(s, " - {at}").unwrap(),
                (k, true) => write!(s, "{k}*{at}").unwrap(),
                (k, false) if k < 0 => write!(s, " - {}*{at}", -k).unwrap(),
                (k, false) => write!(s, " + {k}*{at}").unwrap(),
            }
        }
        match (self.c, s.is_empty()) {
            (c, true) => c.to_string(),
            (0, false) => s,
            (c, false) if c < 0 => format!("{s} - {}", -c),
            (c, false) => format!("{s} + {c}"),
        }
    }
}

impl Atom {
    /// Every variable the atom uses.
    pub fn vars(&self, out: &mut Vec<Var>) {
        Lin::atom(self.clone()).vars(out)
    }

    pub fn range(&self, var: &impl Fn(Var) -> (i64, i64)) -> (i64, i64) {
        match self {
            Atom::Var(v) => var(*v),
            Atom::Div(x, d) => {
                let (l, h) = x.range(var);
                (l.div_euclid(*d), h.div_euclid(*d))
            }
            Atom::Mod(x, d) => {
                let (l, h) = x.range(var);
                if l >= 0 && h < *d { (l, h) } else { (0, d - 1) }
            }
            Atom::Max(x, y) => {
                let ((a, b), (c, d)) = (x.range(var), y.range(var));
                (a.max(c), b.max(d))
            }
            Atom::Min(x, y) => {
                let ((a, b), (c, d)) = (x.range(var), y.range(var));
                (a.min(c), b.min(d))
            }
        }
    }

    pub fn to_c(&self, name: &impl Fn(Var) -> String) -> String {
        match self {
            Atom::Var(v) => name(*v),
            Atom::Div(x, d) => format!("(({}) / {d})", x.to_c(name)),
            Atom::Mod(x, d) => format!("(({}) % {d})", x.to_c(name)),
            Atom::Max(x, y) => format!("th_maxi({}, {})", x.to_c(name), y.to_c(name)),
            Atom::Min(x, y) => format!("th_mini({}, {})", x.to_c(name), y.to_c(name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(n: usize) -> Lin {
        Lin::var(Var::Loop { stage: 0, node: n })
    }

    #[test]
    fn canonical_form_cancels_and_merges() {
        let e = v(1).scale(4).add(&v(0)).add_const(3);
        let f = v(0).add(&v(1).scale(4));
        assert_eq!(e.sub(&f).as_const(), Some(3));
        assert_eq!(v(0).scale(8).add_const(16).div(8), v(0).add_const(2));
        assert_eq!(v(0).scale(8).rem(4).as_const(), Some(0));
    }

    #[test]
    fn ranges_are_conservative_and_exact_for_affine() {
        let r = |v: Var| match v {
            Var::Loop { node: 0, .. } => (0, 3),
            _ => (0, 7),
        };
        let e = v(0).scale(8).add(&v(1)).add_const(-2);
        assert_eq!(e.range(&r), (-2, 24 + 7 - 2));
        assert_eq!(e.rem(5).range(&r), (0, 4));
    }
}
