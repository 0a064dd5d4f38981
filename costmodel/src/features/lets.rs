//! Region starts (`Let`s of the lowered program), substituted into the indices that use them.

use std::borrow::Cow;
use tunehub_engine::lower::{Atom, Lin, Var};

/// Region-start variables and their definitions. A handful per program: a vector searched
/// linearly beats hashing here.
#[derive(Default)]
pub(super) struct Lets(Vec<(Var, Lin)>);

impl Lets {
    pub(super) fn get(&self, v: &Var) -> Option<&Lin> {
        self.0.iter().find(|(w, _)| w == v).map(|(_, l)| l)
    }

    pub(super) fn insert(&mut self, v: Var, l: Lin) {
        match self.0.iter_mut().find(|(w, _)| *w == v) {
            Some(slot) => slot.1 = l,
            None => self.0.push((v, l)),
        }
    }

    /// Whether `l` uses a region-start variable (else substitution leaves it as it is).
    pub(super) fn used_in(&self, l: &Lin) -> bool {
        l.terms.iter().any(|(a, _)| match a {
            Atom::Var(v) => self.get(v).is_some(),
            Atom::Div(x, _) | Atom::Mod(x, _) => self.used_in(x),
            Atom::Max(x, y) | Atom::Min(x, y) => self.used_in(x) || self.used_in(y),
        })
    }
}

/// `l` with region-start variables replaced by their definitions.
pub(super) fn subst<'l>(l: &'l Lin, lets: &Lets) -> Cow<'l, Lin> {
    if !lets.used_in(l) {
        return Cow::Borrowed(l);
    }
    let mut out = Lin::constant(l.c);
    for (a, k) in &l.terms {
        let t = match a {
            Atom::Var(v) => lets.get(v).cloned().unwrap_or_else(|| Lin::var(*v)),
            Atom::Div(x, d) => subst(x, lets).div(*d),
            Atom::Mod(x, d) => subst(x, lets).rem(*d),
            Atom::Max(x, y) => subst(x, lets).maximum(&subst(y, lets)),
            Atom::Min(x, y) => subst(x, lets).minimum(&subst(y, lets)),
        };
        out = out.add(&t.scale(*k));
    }
    Cow::Owned(out)
}
